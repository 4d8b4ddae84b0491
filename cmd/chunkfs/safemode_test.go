package main

import (
	"strings"
	"testing"
)

// TestAdminSafeMode: each subcommand through the binary: get, enter (held,
// and shown by admin report), wait giving up after --timeout with exit
// status 1, leave, wait returning at once; an ordinary user may get but
// not enter or leave; bad input is a usage error.
func TestAdminSafeMode(t *testing.T) {
	cl, _ := drainCluster(t)
	inv := invocation{master: cl.MasterAddr()}
	run := func(args ...string) string {
		t.Helper()
		r := runWith(t, inv, args...)
		if r.code != 0 {
			t.Fatalf("chunkfs %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	if out := run("admin", "safemode"); out != "Safe mode is OFF\n" {
		t.Errorf("admin safemode:\n%s", out)
	}
	if out := run("admin", "safemode", "enter"); !strings.Contains(out, "Safe mode is ON (held by an operator") {
		t.Errorf("admin safemode enter:\n%s", out)
	}
	if out := run("admin", "safemode", "get", "--json"); !strings.Contains(out, `"held": true`) {
		t.Errorf("admin safemode get --json:\n%s", out)
	}
	if out := run("admin", "report"); !strings.Contains(out, "Safe mode:         on (held by an operator") {
		t.Errorf("admin report does not show the hold:\n%s", out)
	}
	r := runWith(t, inv, "admin", "safemode", "wait", "--timeout", "300ms")
	if r.code != 1 || !strings.Contains(r.stderr, "still in safe mode (held by an operator") {
		t.Errorf("wait while held: exit %d, stderr %q", r.code, r.stderr)
	}
	makeBinaryReachable(t)
	user := inv
	user.unprivileged = true
	if out := runWith(t, user, "admin", "safemode", "get").stdout; !strings.Contains(out, "Safe mode is ON") {
		t.Errorf("a user's get:\n%s", out)
	}
	for _, a := range []string{"leave", "enter"} {
		r := runWith(t, user, "admin", "safemode", a)
		if r.code != 1 || !strings.Contains(r.stderr, "superuser") {
			t.Errorf("a user's %s: exit %d, stderr %q", a, r.code, r.stderr)
		}
	}
	if out := run("admin", "safemode", "leave"); out != "Safe mode is OFF\n" {
		t.Errorf("admin safemode leave:\n%s", out)
	}
	if out := run("admin", "safemode", "wait"); out != "Safe mode is OFF\n" {
		t.Errorf("admin safemode wait:\n%s", out)
	}
	for _, args := range [][]string{
		{"admin", "safemode", "off"},
		{"admin", "safemode", "get", "leave"},
		{"admin", "safemode", "get", "--timeout", "1s"},
		{"admin", "safemode", "wait", "--timeout", "-1s"},
		{"admin", "report", "--timeout", "1s"},
	} {
		r := runWith(t, inv, args...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("chunkfs %s: exit %d, stderr %q; want a usage error", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
