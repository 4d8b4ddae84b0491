package chunkstore

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// FS is the small part of a file system that the store uses. OS is the real
// one; MemFS keeps files in memory and can simulate a crash.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	// Rename moves oldname to newname, replacing it, durably: once it
	// returns, the directory change survives a crash.
	Rename(oldname, newname string) error
	MkdirAll(name string, perm fs.FileMode) error
	// ReadDir returns the names in directory name, in no particular order.
	ReadDir(name string) ([]string, error)
	// Space describes the file system holding dir.
	Space(dir string) (Disk, error)
	// SyncFS makes everything written to the file system holding dir
	// durable, files and directories: syncfs(2).
	SyncFS(dir string) error
}

// Disk is one file system holding data directories: its identity, size
// and the bytes free to the store.
type Disk struct {
	// ID names the file system across a cluster (the host and the file
	// system's ID), so a disk several directories or servers share is
	// counted once.
	ID          string
	Total, Free int64
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Size() (int64, error)
}

// OS is the operating system's file system.
type OS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// OpenFile is os.OpenFile.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove is os.Remove.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename is os.Rename followed by an fsync of newname's directory, so
// the rename itself is durable.
func (OS) Rename(oldname, newname string) error {
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(newname))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SyncFS is syncfs(2) of dir's file system.
func (OS) SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &fs.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}

// MkdirAll is os.MkdirAll.
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// ReadDir lists the names in a directory.
func (OS) ReadDir(name string) ([]string, error) {
	des, err := os.ReadDir(name)
	names := make([]string, len(des))
	for i, de := range des {
		names[i] = de.Name()
	}
	return names, err
}

// Space reports the identity, size and free space of dir's file system
// (statfs); the identity is the host name and the file system ID.
func (OS) Space(dir string) (Disk, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Disk{}, err
	}
	host, _ := os.Hostname()
	return Disk{
		ID:    fmt.Sprintf("%s:%x:%x", host, uint32(st.Fsid.X__val[0]), uint32(st.Fsid.X__val[1])),
		Total: int64(st.Blocks) * int64(st.Bsize),
		Free:  int64(st.Bavail) * int64(st.Bsize),
	}, nil
}
