package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs/internal/rpc"
)

// TestCertRevoke revokes certificates by name, serial and file, and checks
// the CRL that results: signed by the CA, numbered up, in force in a
// process's TLS directory; bad requests change nothing.
func TestCertRevoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ok(t, "", "cert", "init", "--dir", dir)
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "client", "--name", "alice", "--uid", "1000")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "client", "--name", "bob", "--uid", "1001")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "chunkserver", "--name", "cs1", "--host", "127.0.0.1")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "mount", "--name", "bob", "--uid", "1001", "--out", filepath.Join(dir, "bob-mount"))
	load := func(name string) *rpc.Security {
		t.Helper()
		sec, err := rpc.LoadSecurity(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return sec
	}
	alice, bob, bobMount := load("alice"), load("bob"), load("bob-mount")
	if l := alice.CRL(); l == nil || l.Len() != 0 || l.Number.Int64() != 0 {
		t.Fatalf("an issued directory's CRL: %+v", l)
	}
	crl := func() []byte {
		data, err := os.ReadFile(filepath.Join(dir, "ca.crl"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	out := ok(t, "", "cert", "revoke", "--dir", dir, "--name", "alice")
	if !strings.Contains(out, "revoked serial") || !strings.Contains(out, "client alice") || !strings.Contains(out, "CRL number 1") {
		t.Errorf("revoke --name alice printed %q", out)
	}
	out = ok(t, "", "cert", "revoke", "--dir", dir, "--name", "bob", "--role", "mount")
	if !strings.Contains(out, "mount bob") || strings.Contains(out, "client bob") || !strings.Contains(out, "CRL number 2") {
		t.Errorf("revoke --name bob --role mount printed %q", out)
	}
	before := crl()
	out = ok(t, "", "cert", "revoke", "--dir", dir, "--cert", filepath.Join(dir, "alice", "tls.crt"))
	if !strings.Contains(out, "revoked already") || string(crl()) != string(before) {
		t.Errorf("revoking alice again printed %q and changed the CRL: %v", out, string(crl()) != string(before))
	}

	// A process's TLS directory takes the new list when it is copied in.
	cs := load("cs1")
	if err := os.WriteFile(filepath.Join(dir, "cs1", "ca.crl"), crl(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReloadCRL(); err != nil {
		t.Fatal(err)
	}
	l := cs.CRL()
	if l.Number.Int64() != 2 || !l.Revoked(alice.Certificate()) || !l.Revoked(bobMount.Certificate()) || l.Revoked(bob.Certificate()) {
		t.Errorf("CRL number %v revokes alice %v, bob's mount %v, bob %v", l.Number, l.Revoked(alice.Certificate()), l.Revoked(bobMount.Certificate()), l.Revoked(bob.Certificate()))
	}
	serial := bob.Certificate().SerialNumber.Text(16)

	other := filepath.Join(t.TempDir(), "other")
	ok(t, "", "cert", "init", "--dir", other)
	ok(t, "", "cert", "issue", "--dir", other, "--role", "client", "--name", "eve", "--uid", "5")
	before = crl()
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"cert", "revoke", "--dir", dir}, 2, "need --dir and one of --name, --serial or --cert"},
		{[]string{"cert", "revoke", "--dir", dir, "--serial", serial, "--role", "client"}, 2, "--role goes with --name"},
		{[]string{"cert", "revoke", "--dir", dir, "--name", "carol"}, 1, `no certificate issued to "carol"`},
		{[]string{"cert", "revoke", "--dir", dir, "--serial", "xyz"}, 2, "not a hexadecimal serial"},
		{[]string{"cert", "revoke", "--dir", dir, "--cert", filepath.Join(other, "eve", "tls.crt")}, 1, "was not issued by the CA"},
		{[]string{"cert", "revoke", "--dir", dir, "--cert", filepath.Join(dir, "ca.key")}, 1, "not a PEM certificate"},
		{[]string{"cert", "revoke", "--dir", filepath.Join(dir, "none"), "--name", "bob"}, 1, "no such file"},
		{[]string{"cert", "revoke", "--dir", dir, "--name", "bob", "--serial", serial, "--days", "0"}, 2, "--days must be positive"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d and one line mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
	if string(crl()) != string(before) {
		t.Error("a refused revoke changed the CRL")
	}
	// A CA directory whose CRL was replaced by another CA's is refused.
	if err := os.WriteFile(filepath.Join(dir, "ca.crl"), mustRead(t, filepath.Join(other, "ca.crl")), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "cert", "revoke", "--dir", dir, "--serial", serial); r.code == 0 || !strings.Contains(r.stderr, "not signed by the cluster CA") {
		t.Errorf("revoke with a foreign CRL in the CA directory: exit %d, %q", r.code, r.stderr)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
