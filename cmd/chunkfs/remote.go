package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// writeRemote writes r to the chunkfs file dst through a temporary file
// beside it, renamed over dst only once every byte is on the replicas
// (Close returned no error). A failed or interrupted write leaves an
// existing dst whole and removes the partial copy. When dst exists, the
// caller must be allowed to write it, and its permission bits and
// replication factor carry over to the new file (its owner becomes the
// writer, as with hdfs dfs -put -f).
func writeRemote(ctx context.Context, c *client.Client, dst string, r io.Reader) error {
	old, err := c.Stat(ctx, dst) // also refuses a name or path over the limits, before any byte is sent
	switch {
	case err == nil && old.IsDir():
		return chunkfs.E("create", dst, chunkfs.KindIsDir, "")
	case err == nil && !canWrite(old):
		return chunkfs.E("open", dst, chunkfs.KindPermission, "")
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return err
	}
	tmp := tempName(dst)
	err = copyToTemp(ctx, c, tmp, r, old)
	if err == nil {
		err = c.Rename(ctx, tmp, dst)
	}
	if err != nil {
		return cleanUp(ctx, c, tmp, retarget(err, tmp, dst))
	}
	return nil
}

// copyToTemp creates tmp exclusively, copies r into it and closes it,
// then gives it old's permission bits when old is set; it is created
// with old's replication.
func copyToTemp(ctx context.Context, c *client.Client, tmp string, r io.Reader, old *chunkfs.FileInfo) error {
	var o client.CreateOptions
	if old != nil {
		o.Replication = old.Replication
	}
	f, err := c.OpenFileWith(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666, o)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || old == nil {
		return err
	}
	return c.Chmod(ctx, tmp, old.FileMode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// cleanUp removes the partial copy tmp after err, even when ctx was
// cancelled (Ctrl-C), and says so in the error when it cannot.
func cleanUp(ctx context.Context, c *client.Client, tmp string, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rerr := c.Remove(rctx, tmp)
	if rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
		return err
	}
	return &leftError{err: err, tmp: tmp, rerr: rerr}
}

// leftError is a failed write whose partial copy could not be removed.
type leftError struct {
	err  error
	tmp  string
	rerr error
}

func (l *leftError) Error() string {
	return l.err.Error() + " (the partial copy " + l.tmp + " is left: " + l.rerr.Error() + ")"
}

func (l *leftError) Unwrap() error { return l.err }

// retarget names dst where err names the temporary file tmp, so that a
// failed put says "create /data/x: …", not the temporary name.
func retarget(err error, tmp, dst string) error {
	return &renamedError{err: err, tmp: tmp, dst: dst}
}

type renamedError struct {
	err      error
	tmp, dst string
}

func (r *renamedError) Error() string { return strings.ReplaceAll(r.err.Error(), r.tmp, r.dst) }

func (r *renamedError) Unwrap() error { return r.err }

// tempName returns a fresh hidden name beside dst for writing it:
// ".NAME.RANDOM.put", with NAME cut so the whole stays a valid name.
func tempName(dst string) string {
	var b [8]byte
	rand.Read(b[:])
	dir, name := path.Split(dst)
	const room = chunkfs.MaxNameLen - len(".") - len(".0123456789abcdef.put")
	if len(name) > room {
		name = name[:room]
	}
	return dir + "." + name + "." + hex.EncodeToString(b[:]) + ".put"
}

// canWrite reports whether this process's user may write the file fi
// describes. writeRemote asks before replacing a file, since a rename needs
// only the directory's permission and would let a user replace a file they
// may not write.
func canWrite(fi *chunkfs.FileInfo) bool {
	caller := client.DefaultConfig().Caller
	return caller.Allows(fi.FileMode, fi.UID, fi.GID, chunkfs.AccessWrite)
}
