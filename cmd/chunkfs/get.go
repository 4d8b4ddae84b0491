package main

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
)

var getCommand = &command{
	name:    "get",
	args:    "REMOTE LOCAL",
	summary: "copy a chunkfs file to a local file (- for stdout), into LOCAL when it is a directory",
	example: "  chunkfs get /logs/today ./today.log",
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
	}
	return err
}
