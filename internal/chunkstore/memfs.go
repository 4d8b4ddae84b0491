package chunkstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
)

// MemFS is an in-memory FS for tests that can simulate a crash. Every file
// keeps its durable contents (as of its last Sync) and the operations made
// since, in one log across all files. Crash(n, torn) keeps the first n
// logged operations, the first torn bytes of the next one if it is a write,
// and drops the rest: what a process killed in the middle of a sequence of
// system calls leaves behind. Directories are implicit and always durable.
//
// SetFault injects errors: a full disk, a failing one, at any operation.
type MemFS struct {
	mu    sync.Mutex // guards files, log and fault
	files map[string]*memNode
	log   []memOp // unsynced operations, oldest first
	space int64
	fault func(op, name string) error
}

type memNode struct {
	data    []byte // current contents
	durable []byte // contents as of the last Sync
}

type memOp struct {
	name  string
	off   int64
	data  []byte // nil for a truncate
	trunc int64
}

// NewMemFS returns an empty MemFS reporting space bytes of capacity.
func NewMemFS(space int64) *MemFS {
	return &MemFS{files: make(map[string]*memNode), space: space}
}

// SetFault makes every later operation first call fault with its name
// ("open", "read", "write", "truncate", "sync", "remove", "rename",
// "mkdir", "readdir") and
// the file's; an error fails the operation, which then does nothing
// (wrapped in a *fs.PathError, so errors.Is sees syscall.ENOSPC or
// syscall.EIO). fault runs with the MemFS locked and must not call it.
// nil removes it.
func (m *MemFS) SetFault(fault func(op, name string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = fault
}

// faultLocked returns the injected error of op on name, if any.
func (m *MemFS) faultLocked(op, name string) error {
	if m.fault == nil {
		return nil
	}
	if err := m.fault(op, name); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// OpenFile opens or creates a file (O_CREATE, O_EXCL and O_TRUNC are honoured).
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.faultLocked("open", name); err != nil {
		return nil, err
	}
	n, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{}
		m.files[name] = n
	}
	f := &memFile{fs: m, name: name, node: n}
	if flag&os.O_TRUNC != 0 {
		f.truncateLocked(0)
	}
	return f, nil
}

// Remove deletes a file.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.faultLocked("remove", name); err != nil {
		return err
	}
	if _, ok := m.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

// Rename moves a file, replacing newname. The rename is durable at once
// (as OS.Rename makes it): the file's durable contents move with it, and
// its logged operations follow it to the new name.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = path.Clean(oldname), path.Clean(newname)
	if err := m.faultLocked("rename", oldname); err != nil {
		return err
	}
	n, ok := m.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = n
	log := m.log[:0]
	for _, op := range m.log {
		switch op.name {
		case newname:
			continue // the replaced file's pending operations go with it
		case oldname:
			op.name = newname
		}
		log = append(log, op)
	}
	m.log = log
	return nil
}

// MkdirAll does nothing but fail when a fault says so: directories are
// implicit.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.faultLocked("mkdir", path.Clean(name))
}

// ReadDir lists the files and implicit directories directly under name.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.faultLocked("readdir", path.Clean(name)); err != nil {
		return nil, err
	}
	prefix := path.Clean(name) + "/"
	seen := map[string]bool{}
	for f := range m.files {
		if rest, ok := strings.CutPrefix(f, prefix); ok {
			seen[strings.SplitN(rest, "/", 2)[0]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Space reports the configured capacity, less the bytes held; every
// directory of one MemFS is on one disk.
func (m *MemFS) Space(dir string) (Disk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	used := int64(0)
	for _, n := range m.files {
		used += int64(len(n.data))
	}
	return Disk{ID: fmt.Sprintf("memfs:%p", m), Total: m.space, Free: max(0, m.space-used)}, nil
}

// Pending returns the number of operations not yet made durable by Sync.
func (m *MemFS) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.log)
}

// Crash simulates a crash: every file returns to its durable contents, then
// the first keep logged operations are replayed, then the first torn bytes
// of the next one if it is a write. The log is emptied.
func (m *MemFS) Crash(keep, torn int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.files {
		n.data = append([]byte(nil), n.durable...)
	}
	for i, op := range m.log {
		n := m.files[op.name]
		if n == nil || i > keep {
			continue
		}
		if i == keep {
			if op.data == nil {
				continue
			}
			op.data = op.data[:min(torn, len(op.data))]
		}
		n.data = applyOp(n.data, op)
	}
	for _, n := range m.files {
		n.durable = append([]byte(nil), n.data...)
	}
	m.log = nil
}

func applyOp(data []byte, op memOp) []byte {
	if op.data == nil {
		if op.trunc <= int64(len(data)) {
			return data[:op.trunc]
		}
		return append(data, make([]byte, op.trunc-int64(len(data)))...)
	}
	if end := op.off + int64(len(op.data)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[op.off:], op.data)
	return data
}

// Corrupt flips bits of one byte of a file in place (and durably), as a bad
// disk would.
func (m *MemFS) Corrupt(name string, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[path.Clean(name)]
	if !ok || off < 0 || off >= int64(len(n.data)) {
		return errors.New("memfs: no such byte")
	}
	n.data[off] ^= 0x5a
	if off < int64(len(n.durable)) {
		n.durable[off] ^= 0x5a
	}
	return nil
}

type memFile struct {
	fs     *MemFS
	name   string
	node   *memNode
	closed bool
}

var errClosed = errors.New("memfs: file closed")

// lock locks the file system for operation op on f, failing, unlocked,
// when f is closed or a fault is set for op; unlock ends the operation.
func (f *memFile) lock(op string) (unlock func(), err error) {
	f.fs.mu.Lock()
	if f.closed {
		err = errClosed
	} else {
		err = f.fs.faultLocked(op, f.name)
	}
	if err != nil {
		f.fs.mu.Unlock()
		return nil, err
	}
	return f.fs.mu.Unlock, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	unlock, err := f.lock("read")
	if err != nil {
		return 0, err
	}
	defer unlock()
	if off < 0 {
		return 0, errors.New("memfs: negative offset")
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	unlock, err := f.lock("write")
	if err != nil {
		return 0, err
	}
	defer unlock()
	if off < 0 {
		return 0, errors.New("memfs: negative offset")
	}
	op := memOp{name: f.name, off: off, data: append([]byte{}, p...)}
	f.node.data = applyOp(f.node.data, op)
	f.fs.log = append(f.fs.log, op)
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	unlock, err := f.lock("truncate")
	if err != nil {
		return err
	}
	defer unlock()
	f.truncateLocked(size)
	return nil
}

func (f *memFile) truncateLocked(size int64) {
	op := memOp{name: f.name, trunc: size}
	f.node.data = applyOp(f.node.data, op)
	f.fs.log = append(f.fs.log, op)
}

// SyncFS makes every file under dir durable, as their Syncs would
// (fault op "sync", with dir's name).
func (m *MemFS) SyncFS(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.faultLocked("sync", dir); err != nil {
		return err
	}
	prefix := strings.TrimSuffix(path.Clean(dir), "/") + "/"
	under := func(name string) bool { return strings.HasPrefix(name, prefix) }
	for name, n := range m.files {
		if under(name) {
			n.durable = append(n.durable[:0], n.data...)
		}
	}
	log := m.log[:0]
	for _, op := range m.log {
		if !under(op.name) {
			log = append(log, op)
		}
	}
	m.log = log
	return nil
}

// Sync makes the file's contents durable and drops its logged operations.
func (f *memFile) Sync() error {
	unlock, err := f.lock("sync")
	if err != nil {
		return err
	}
	defer unlock()
	f.node.durable = append(f.node.durable[:0], f.node.data...)
	log := f.fs.log[:0]
	for _, op := range f.fs.log {
		if op.name != f.name {
			log = append(log, op)
		}
	}
	f.fs.log = log
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.closed = true
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}
