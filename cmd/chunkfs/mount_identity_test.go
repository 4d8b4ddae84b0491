package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs/internal/rpc"
)

// TestSingleUserMount: a mount of a plain user certificate run by another
// user without --allow-other would serve no one, and is refused; a proxy
// certificate, the certificate's own user, or --allow-other may mount.
func TestSingleUserMount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ok(t, "", "cert", "init", "--dir", dir)
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "mount", "--name", "laptop", "--uid", "1000", "--no-proxy")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "mount", "--name", "gw", "--uid", "0")
	plain, err := rpc.LoadSecurity(filepath.Join(dir, "laptop"))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := rpc.LoadSecurity(filepath.Join(dir, "gw"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sec        *rpc.Security
		allowOther bool
		uid        uint32
		ok         bool
	}{
		{plain, false, 1000, true},
		{plain, true, 0, true},
		{plain, false, 0, false},
		{proxy, false, 1000, true},
		{rpc.Insecure(), false, 1000, true},
	} {
		err := singleUserMount(tc.sec, tc.allowOther, tc.uid)
		if (err == nil) != tc.ok {
			t.Errorf("%+v, allow-other %v, uid %d: %v", tc.sec.Identity(), tc.allowOther, tc.uid, err)
		}
		if err != nil && !strings.Contains(err.Error(), "acts only as uid 1000") {
			t.Errorf("refusal %q does not say whom the certificate acts as", err)
		}
	}
}
