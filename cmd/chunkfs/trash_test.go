package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/cluster"
)

// TestTrashCLI: rm moves a file to the trash, trash ls shows it, undelete
// brings it back (and refuses a taken name, in one line, changing
// nothing), rm --skip-trash deletes at once, and admin report counts the
// dead files.
func TestTrashCLI(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers, cfg.Replication = 1, 1
	cfg.TrashPeriod = time.Hour
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	inv := invocation{master: cl.MasterAddr()}
	run := func(stdin string, args ...string) result {
		t.Helper()
		inv.stdin = strings.NewReader(stdin)
		return runWith(t, inv, args...)
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		r := run(stdin, args...)
		if r.code != 0 {
			t.Fatalf("chunkfs %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	must("", "mkdir", "-p", "/t/d")
	must("precious", "put", "-", "/t/f")
	must("x", "put", "-", "/t/d/g")
	must("", "rm", "/t/f")
	must("", "rm", "-r", "/t/d")
	var es []trashJSON
	if err := json.Unmarshal([]byte(must("", "trash", "ls", "--json")), &es); err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Path != "/t/f" || es[0].Bytes != 8 || es[1].Path != "/t/d" || es[1].Type != "dir" || es[1].Files != 1 ||
		es[0].Expires.Sub(es[0].Deleted) != time.Hour {
		t.Fatalf("trash ls --json: %+v", es)
	}
	if out := must("", "trash", "ls"); !strings.Contains(out, "/t/f") || !strings.Contains(out, "PURGED IN") {
		t.Errorf("trash ls:\n%s", out)
	}
	if out := must("", "admin", "report"); !strings.Contains(out, "Dead (in trash):   2 files, 1 directories") {
		t.Errorf("admin report does not count the dead files:\n%s", out)
	}
	must("other", "put", "-", "/t/f")
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"undelete", "/t/f"}, 1, "undelete /t/f: file exists"},
		{[]string{"undelete", "/t/nothing"}, 1, "undelete /t/nothing: no such file or directory"},
		{[]string{"undelete", "--to", "/t/gone/f", "/t/f"}, 1, "no such file or directory"},
		{[]string{"undelete", "t/f"}, 2, "absolute"},
		{[]string{"undelete"}, 2, "need the PATH"},
		{[]string{"trash", "purge", "x"}, 2, "positive number"},
		{[]string{"trash", "bin"}, 2, "unknown trash command"},
		{[]string{"master", "--dir", t.TempDir(), "--trash-period", "-1h"}, 2, "--trash-period"},
		{[]string{"master", "--dir", t.TempDir(), "--trash-period", "100000h"}, 2, "--trash-period"},
	} {
		r := run("", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d, one line with %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
	if out := must("", "cat", "/t/f"); out != "other" {
		t.Fatalf("a refused undelete changed /t/f: %q", out)
	}
	must("", "undelete", "--to", "/t/f.old", "/t/f")
	must("", "undelete", "-p", "--to", "/u/v/d", "/t/d")
	if out := must("", "cat", "/t/f.old"); out != "precious" {
		t.Fatalf("undeleted file reads %q", out)
	}
	if out := must("", "cat", "/u/v/d/g"); out != "x" {
		t.Fatalf("undeleted tree's file reads %q", out)
	}
	must("", "rm", "--skip-trash", "/t/f.old")
	if out := must("", "trash", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("trash after undelete and skip-trash: %s", out)
	}
}
