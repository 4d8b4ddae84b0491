package chunkstore

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// FS is the small part of a file system that the store uses. OS is the real
// one; MemFS keeps files in memory and can simulate a crash.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	MkdirAll(name string, perm fs.FileMode) error
	// ReadDir returns the names in directory name, in no particular order.
	ReadDir(name string) ([]string, error)
	// Space returns the total and free bytes of the file system holding dir.
	Space(dir string) (total, free int64, err error)
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

// Space reports the size and free space of dir's file system (statfs).
func (OS) Space(dir string) (total, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}
