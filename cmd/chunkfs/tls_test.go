package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTLSCLIAgainstProcesses makes a CA and certificates with `chunkfs
// cert`, runs a master and three chunkserver processes with --tls-dir, and
// drives them with client commands: with the client's certificate
// everything works; with --insecure, or a certificate of another CA, the
// command fails with one line saying why; with neither flag it says which
// to give.
func TestTLSCLIAgainstProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	ok(t, "", "cert", "init", "--dir", ca)
	ok(t, "", "cert", "issue", "--dir", ca, "--role", "master", "--name", "m1", "--host", "127.0.0.1")
	for _, cs := range []string{"cs1", "cs2", "cs3"} {
		ok(t, "", "cert", "issue", "--dir", ca, "--role", "chunkserver", "--name", cs, "--host", "127.0.0.1")
	}
	ok(t, "", "cert", "issue", "--dir", ca, "--role", "client", "--name", "root", "--uid", "0")
	ok(t, "", "cert", "issue", "--dir", ca, "--role", "client", "--name", "mallory", "--uid", "0")
	other := filepath.Join(dir, "other")
	ok(t, "", "cert", "init", "--dir", other)
	ok(t, "", "cert", "issue", "--dir", other, "--role", "client", "--name", "root", "--uid", "0")

	master := freeAddr(t)
	mp := startProc(t, "master", "master", "--dir", filepath.Join(dir, "m1"), "--listen", master,
		"--chunk-size", "65536", "--reserve", "0", "--tls-dir", filepath.Join(ca, "m1"))
	for _, cs := range []string{"cs1", "cs2", "cs3"} {
		startProc(t, cs, "chunkserver", "--dir", filepath.Join(dir, cs), "--listen", freeAddr(t),
			"--master", master, "--heartbeat", "200ms", "--reserve", "0", "--tls-dir", filepath.Join(ca, cs))
	}
	tlsDir := filepath.Join(ca, "root")
	inv := invocation{master: master}
	waitTLSCluster(t, inv, tlsDir)

	data := strings.Repeat("secret data over TLS\n", 10000) // several 64 KiB chunks
	if r := runWith(t, invocation{master: master, stdin: strings.NewReader(data)}, "put", "--tls-dir", tlsDir, "-", "/tls.txt"); r.code != 0 {
		t.Fatalf("put over TLS: exit %d: %s", r.code, r.stderr)
	}
	if r := runWith(t, inv, "cat", "--tls-dir", tlsDir, "/tls.txt"); r.code != 0 || r.stdout != data {
		t.Fatalf("cat over TLS: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	files := []string{"--cert", filepath.Join(tlsDir, "tls.crt"), "--key", filepath.Join(tlsDir, "tls.key"), "--ca", filepath.Join(tlsDir, "ca.crt")}
	if r := runWith(t, inv, append([]string{"ls", "/"}, files...)...); r.code != 0 || !strings.Contains(r.stdout, "tls.txt") {
		t.Fatalf("ls with --cert, --key, --ca: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"insecure", []string{"--insecure"}, "server requires TLS"},
		{"another CA", []string{"--tls-dir", filepath.Join(other, "root")}, "certificate not trusted"},
	} {
		start := time.Now()
		r := runWith(t, inv, append([]string{"cat", "/tls.txt"}, tc.args...)...)
		switch {
		case r.code == 0 || r.stdout != "":
			t.Errorf("%s: exit %d, printed %d bytes", tc.name, r.code, len(r.stdout))
		case !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0:
			t.Errorf("%s: stderr %q; want one line saying %q", tc.name, r.stderr, tc.want)
		case time.Since(start) > 30*time.Second:
			t.Errorf("%s: took %v", tc.name, time.Since(start))
		}
	}

	// Revocation: once the CA's new CRL is copied into the running
	// processes' directories, they refuse the revoked certificate at the
	// handshake, without a restart; SIGHUP reloads it and stops nothing.
	mallory := filepath.Join(ca, "mallory")
	if r := runWith(t, inv, "ls", "--tls-dir", mallory, "/"); r.code != 0 {
		t.Fatalf("ls before revocation: exit %d: %s", r.code, r.stderr)
	}
	ok(t, "", "cert", "revoke", "--dir", ca, "--name", "mallory")
	for _, node := range []string{"m1", "cs1", "cs2", "cs3"} {
		if err := replaceFile(filepath.Join(ca, node, "ca.crl"), mustRead(t, filepath.Join(ca, "ca.crl"))); err != nil {
			t.Fatal(err)
		}
	}
	r := runWith(t, inv, "ls", "--tls-dir", mallory, "/")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate revoked") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("ls with a revoked certificate: exit %d, stderr %q; want one line saying \"certificate revoked\"", r.code, r.stderr)
	}
	if err := mp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, inv, "cat", "--tls-dir", tlsDir, "/tls.txt"); r.code != 0 || r.stdout != data {
		t.Errorf("cat after the revocation and SIGHUP: exit %d: %s", r.code, r.stderr)
	}
}

// TestCLINeedsTLSOrInsecure checks that a command given neither TLS nor
// --insecure fails at once with the line saying which to give.
func TestCLINeedsTLSOrInsecure(t *testing.T) {
	t.Setenv("CHUNKFS_INSECURE", "")
	for _, args := range [][]string{{"ls", "/"}, {"master", "--dir", t.TempDir()}, {"chunkserver", "--dir", t.TempDir()}} {
		r := runCLI(t, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--tls-dir") || !strings.Contains(r.stderr, "--insecure") {
			t.Errorf("chunkfs %s: exit %d, stderr %q; want a usage error naming --tls-dir and --insecure", args[0], r.code, r.stderr)
		}
	}
}

// waitTLSCluster waits until the cluster answers a TLS client and has its
// chunkservers.
func waitTLSCluster(t *testing.T, inv invocation, tlsDir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runWith(t, inv, "admin", "report", "--tls-dir", tlsDir)
		if r.code == 0 && strings.Count(r.stdout, "127.0.0.1") >= 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS cluster not up: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestInsecureMasterSurvivesHangup: a master on plain TCP has no
// revocation list to reload; SIGHUP is logged and the master goes on
// serving, as it does on TLS, instead of ending.
func TestInsecureMasterSurvivesHangup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	master := freeAddr(t)
	mp := startProc(t, "master", "master", "--insecure", "--dir", t.TempDir(), "--listen", master, "--reserve", "0")
	inv := invocation{master: master}
	deadline := time.Now().Add(30 * time.Second)
	for r := runWith(t, inv, "ls", "--insecure", "/"); r.code != 0; r = runWith(t, inv, "ls", "--insecure", "/") {
		if time.Now().After(deadline) {
			t.Fatalf("master not up: exit %d: %s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := mp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(mp.out.String(), "SIGHUP: plain TCP") {
		if time.Now().After(deadline) {
			t.Fatalf("no SIGHUP line in the master's log:\n%s", mp.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := runWith(t, inv, "ls", "--insecure", "/"); r.code != 0 {
		t.Fatalf("ls after SIGHUP: exit %d: %s", r.code, r.stderr)
	}
}
