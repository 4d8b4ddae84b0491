package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// SmallPhase is one phase of bench smallfile, as mdtest's: every file of
// the worker's share is created and written, stat'ed, read back, or
// removed.
type SmallPhase string

// The phases, in the order they run.
const (
	PhaseCreate SmallPhase = "create" // open(O_CREAT|O_EXCL|O_WRONLY), write Size bytes, close
	PhaseStat   SmallPhase = "stat"   // lstat, checking the size
	PhaseRead   SmallPhase = "read"   // open, read whole, compare with what create wrote, close
	PhaseRemove SmallPhase = "remove" // unlink
)

// SmallPhases lists the phases in order.
var SmallPhases = []SmallPhase{PhaseCreate, PhaseStat, PhaseRead, PhaseRemove}

// SmallTask is one worker process's share of a phase: files First to
// First+Count-1 of directory Dir, each Size bytes. It makes real
// syscalls, so on a chunkfs mount it measures the mount as any program
// sees it.
type SmallTask struct {
	Phase SmallPhase `json:"phase"`
	Dir   string     `json:"dir"`
	First int        `json:"first"`
	Count int        `json:"count"`
	Size  int        `json:"size"`
}

func (t *SmallTask) validate() error {
	switch {
	case t == nil:
		return errors.New("smallfile task without its phase")
	case t.Phase != PhaseCreate && t.Phase != PhaseStat && t.Phase != PhaseRead && t.Phase != PhaseRemove:
		return fmt.Errorf("unknown smallfile phase %q", t.Phase)
	case !filepath.IsAbs(t.Dir):
		return fmt.Errorf("smallfile directory %q is not absolute", t.Dir)
	case t.First < 0 || t.Count < 1 || t.Size < 0 || t.Size > 16<<20:
		return fmt.Errorf("smallfile task files [%d, +%d) of %d bytes out of range", t.First, t.Count, t.Size)
	}
	return nil
}

// smallName is the name of file i of a run.
func smallName(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("f%07d", i)) }

// smallContent fills b with the bytes file i holds: its number in every
// 8-byte word, so that a read that returns another file's data, or
// stale or shifted bytes, fails the comparison.
func smallContent(b []byte, i int) {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], uint64(i)*0x9e3779b97f4a7c15+1)
	for k := 0; k < len(b); k += 8 {
		copy(b[k:], w[:])
	}
}

// smallRunner runs a SmallTask.
type smallRunner struct{ t SmallTask }

func (r smallRunner) close() error { return nil }

func (r smallRunner) run(ctx context.Context) (Result, error) {
	op := map[SmallPhase]func(i int, want, got []byte) error{
		PhaseCreate: r.create, PhaseStat: r.stat, PhaseRead: r.read, PhaseRemove: r.remove,
	}[r.t.Phase]
	want := make([]byte, r.t.Size)
	got := make([]byte, r.t.Size+1) // one more byte: a longer file is an error
	return timed(func() (int64, int64, error) {
		var n int64
		for i := r.t.First; i < r.t.First+r.t.Count; i++ {
			if err := ctx.Err(); err != nil {
				return n * int64(r.t.Size), n, err
			}
			if err := op(i, want, got); err != nil {
				return n * int64(r.t.Size), n, err
			}
			n++
		}
		return n * int64(r.t.Size), n, nil
	})
}

func (r smallRunner) create(i int, want, _ []byte) error {
	smallContent(want, i)
	name := smallName(r.t.Dir, i)
	fd, err := openRetry(name, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	k, err := writeFull(fd, want)
	if err == nil && k != len(want) {
		err = io.ErrShortWrite
	}
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

func (r smallRunner) stat(i int, _, _ []byte) error {
	name := smallName(r.t.Dir, i)
	var st syscall.Stat_t
	if err := eintr(func() error { return syscall.Lstat(name, &st) }); err != nil {
		return &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size != int64(r.t.Size) {
		return fmt.Errorf("stat %s: mode %o size %d, want a regular file of %d bytes", name, st.Mode, st.Size, r.t.Size)
	}
	return nil
}

func (r smallRunner) read(i int, want, got []byte) error {
	smallContent(want, i)
	name := smallName(r.t.Dir, i)
	fd, err := openRetry(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	n, err := readFull(fd, got)
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return &os.PathError{Op: "read", Path: name, Err: err}
	case n != len(want):
		return fmt.Errorf("read %s: %d bytes, want %d", name, n, len(want))
	case !bytes.Equal(got[:n], want):
		return fmt.Errorf("read %s: not the bytes written", name)
	}
	return nil
}

// readFull reads until b is full or the file ends.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

func (r smallRunner) remove(i int, _, _ []byte) error {
	name := smallName(r.t.Dir, i)
	if err := eintr(func() error { return syscall.Unlink(name) }); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// eintr retries call while it fails with EINTR, as package os does: the
// Go runtime's own signals (preemption) interrupt slow calls, and a FUSE
// request interrupted before it is answered fails with EINTR.
func eintr(call func() error) error {
	for {
		if err := call(); err != syscall.EINTR {
			return err
		}
	}
}

func openRetry(name string, flags int, perm uint32) (int, error) {
	var fd int
	err := eintr(func() error {
		var err error
		fd, err = syscall.Open(name, flags, perm)
		return err
	})
	return fd, err
}

// writeFull writes all of b.
func writeFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := syscall.Write(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}
