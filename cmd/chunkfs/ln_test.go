package main

import (
	"strings"
	"testing"
)

func TestLn(t *testing.T) {
	ok(t, "", "mkdir", "-p", "/ln/dir")
	ok(t, "linked", "put", "-", "/ln/a")
	ok(t, "", "ln", "/ln/a", "/ln/b")
	ok(t, "", "ln", "/ln/a", "/ln/dir") // into the directory, as ln does
	for _, p := range []string{"/ln/b", "/ln/dir/a"} {
		if out := ok(t, "", "cat", p); out != "linked" {
			t.Errorf("cat %s = %q", p, out)
		}
	}
	if out := ok(t, "", "stat", "/ln/b"); !strings.Contains(out, "Links:       3\n") {
		t.Errorf("stat of a file with three names:\n%s", out)
	}
	ok(t, "", "rm", "/ln/a")
	if out := ok(t, "", "cat", "/ln/b"); out != "linked" {
		t.Errorf("cat /ln/b after rm /ln/a = %q", out)
	}
	if out := ok(t, "", "stat", "--json", "/ln/dir/a"); !strings.Contains(out, `"nlink": 2`) {
		t.Errorf("stat --json after rm /ln/a:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"ln", "/ln/missing", "/ln/x"}, 1, "link /ln/missing: no such file or directory"},
		{[]string{"ln", "/ln/b", "/ln/dir/a"}, 1, "link /ln/dir/a: file exists"},
		{[]string{"ln", "/ln/dir", "/ln/dir2"}, 1, "link /ln/dir: permission denied: a directory cannot have another name"},
		{[]string{"ln", "/ln/b", "/ln/nope/x"}, 1, "no such file or directory"},
		{[]string{"ln", "/ln/b", "/ln/" + strings.Repeat("n", 256)}, 1, "longer than 255 bytes"},
		{[]string{"ln", "/ln/b"}, 2, "need OLD and NEW"},
		{[]string{"ln", "/ln/b", "/ln/c", "/ln/d"}, 2, "need OLD and NEW"},
		{[]string{"ln", "ln/b", "/ln/c"}, 2, "absolute"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d, one line with %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
	ok(t, "", "rm", "-r", "/ln")
}
