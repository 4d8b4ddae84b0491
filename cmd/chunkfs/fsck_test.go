package main

import (
	"strings"
	"testing"
)

func TestAdminFsck(t *testing.T) {
	ok(t, "hello\n", "put", "-", "/fsck-a")
	out := ok(t, "", "admin", "fsck", "/fsck-a")
	if !strings.Contains(out, "HEALTHY") || !strings.Contains(out, "/fsck-a") || !strings.Contains(out, "Missing:           0") {
		t.Fatalf("admin fsck:\n%s", out)
	}
	if out := ok(t, "", "admin", "fsck", "--json"); !strings.Contains(out, `"missing": 0`) || !strings.Contains(out, `"path": "/fsck-a"`) {
		t.Fatalf("admin fsck --json:\n%s", out)
	}
}
