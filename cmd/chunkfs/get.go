package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/chunkfs/chunkfs/client"
)

var getCommand = &command{
	name:    "get",
	args:    "REMOTE LOCAL",
	summary: "copy a chunkfs file or directory to local (- for stdout), into LOCAL when it is a directory",
	example: "  chunkfs get /logs/today ./today.log\n  chunkfs get /logs ./backup/",
	run:     runGet,
}

func runGet(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	ops, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 2 {
		return usagef("need REMOTE and LOCAL")
	}
	remote, local := ops[0], ops[1]
	if remote, err = remotePath(remote); err != nil {
		return err
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	if fi, err := c.Stat(ctx, remote); err == nil && fi.IsDir() {
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			local = filepath.Join(local, path.Base(remote))
		}
		return getTree(ctx, e, c, remote, local)
	}
	return getOne(ctx, e, c, remote, local)
}

// getTree copies remote directory dir to local directory local.
func getTree(ctx context.Context, e *env, c *client.Client, dir, local string) error {
	root := strings.TrimPrefix(dir, "/")
	if root == "" {
		root = "."
	}
	return fs.WalkDir(c.FS(ctx), root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		switch {
		case p == root:
			rel = ""
		case root == ".":
			rel = p
		}
		dst := filepath.Join(local, filepath.FromSlash(rel))
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			return getOne(ctx, e, c, "/"+p, dst)
		}
		return nil
	})
}

// getOne copies remote file remote to local (- for stdout).
func getOne(ctx context.Context, e *env, c *client.Client, remote, local string) error {
	in, err := c.Open(ctx, remote)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if local == "-" {
		_, err = io.Copy(e.stdout, in)
		return err
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	return writeLocal(local, progressReader(e, in, fi.Length, "get "+path.Base(remote)))
}

// writeLocal writes r to a temporary file beside name and renames it into
// place, so a failed transfer leaves no partial file.
func writeLocal(name string, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".part*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fs.PathError{Op: "create", Path: name, Err: pe.Err}
		}
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return retarget(err, tmp.Name(), name)
	}
	return nil
}
