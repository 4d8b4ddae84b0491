package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chunkfs dev --masters 3 --observers 2 runs a whole group in one process,
// names every master and the CHUNKFS_MASTER list, and the list works: a
// file written through the leader reads back, and admin ha sees one
// leader, two followers and two observers.
func TestDevGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a group of five masters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "dev", "--dir", t.TempDir(), "--listen", freeAddr(t),
		"--chunk-size", "65536", "--masters", "3", "--observers", "2")
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Ctrl-C stops the cluster") {
		if time.Now().After(deadline) {
			t.Fatalf("chunkfs dev did not start; output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	banner := out.String()
	deadline = time.Now().Add(30 * time.Second)
	for _, id := range []string{"m1", "m2", "m3", "o1", "o2"} {
		if !regexp.MustCompile(`(?m)^  master ` + id + ` on 127\.0\.0\.1:\d+$`).MatchString(banner) {
			t.Errorf("banner names no master %s:\n%s", id, banner)
		}
	}
	m := regexp.MustCompile(`export CHUNKFS_MASTER=(\S+)`).FindStringSubmatch(banner)
	if m == nil || strings.Count(m[1], ",") != 4 {
		t.Fatalf("banner gives no CHUNKFS_MASTER list of five:\n%s", banner)
	}
	data := strings.Repeat("group ", 30000) // several 64 KiB chunks
	inv := invocation{master: m[1], stdin: strings.NewReader(data)}
	if r := runWith(t, inv, "put", "-", "/g"); r.code != 0 {
		t.Fatalf("put: exit %d: %s", r.code, r.stderr)
	}
	inv.stdin = nil
	if r := runWith(t, inv, "cat", "/g"); r.code != 0 || r.stdout != data {
		t.Fatalf("cat: exit %d, %d bytes of %d: %s", r.code, len(r.stdout), len(data), r.stderr)
	}
	// The observers join the group in the background; wait for them.
	for {
		r := runWith(t, inv, "admin", "ha")
		if r.code == 0 && strings.Count(r.stdout, "leader") == 1 && strings.Count(r.stdout, "follower") == 2 && strings.Count(r.stdout, "observer") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin ha: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chunkfs dev after Ctrl-C: %v\n%s", err, out.String())
	}
}
