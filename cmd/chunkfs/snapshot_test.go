package main

import (
	"strings"
	"testing"
)

func TestSnapshot(t *testing.T) {
	ok(t, "", "mkdir", "-p", "/snapcli/src/d")
	ok(t, "first", "put", "-", "/snapcli/src/d/f")
	ok(t, "", "snapshot", "/snapcli/src", "/snapcli/copy")
	ok(t, "second", "put", "-", "/snapcli/src/d/f") // rewrites the source
	if out := ok(t, "", "cat", "/snapcli/copy/d/f"); out != "first" {
		t.Errorf("snapshot after the source was rewritten: %q", out)
	}
	if out := ok(t, "", "cat", "/snapcli/src/d/f"); out != "second" {
		t.Errorf("source after its rewrite: %q", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"snapshot", "/snapcli/missing", "/snapcli/x"}, 1, "snapshot /snapcli/missing: no such file or directory"},
		{[]string{"snapshot", "/snapcli/src", "/snapcli/copy"}, 1, "snapshot /snapcli/copy: file exists"},
		{[]string{"snapshot", "/snapcli/src", "/snapcli/src/in"}, 1, "cannot be inside its source"},
		{[]string{"snapshot", "/snapcli/src", "/snapcli/nope/x"}, 1, "no such file or directory"},
		{[]string{"snapshot", "/snapcli/src"}, 2, "need SRC and DST"},
		{[]string{"snapshot", "snapcli/src", "/snapcli/y"}, 2, "absolute"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d, one line with %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
	ok(t, "", "rm", "-r", "/snapcli")
}
