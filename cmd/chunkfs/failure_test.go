package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// The failure-mode tests run every command where it must fail — a missing
// local source, a missing remote parent, a name too long, permission
// denied, the master unreachable, no chunkserver able to take the data —
// and check that each exits non-zero with one line on stderr naming what
// failed, and that nothing changed: the cluster's tree (paths, modes,
// owners, sizes, contents) and the local directory are as before.

// invocation is one run of the binary.
type invocation struct {
	master       string // master address; the shared test cluster when empty
	stdin        io.Reader
	dir          string // working directory
	unprivileged bool   // run as nobody (65534) when the test runs as root
}

// runWith runs the binary with args as inv says.
func runWith(t *testing.T, inv invocation, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	master := inv.master
	if master == "" {
		master = testCluster.MasterAddr()
	}
	cmd.Env = append(os.Environ(), "CHUNKFS_MASTER="+master)
	cmd.Dir = inv.dir
	cmd.Stdin = inv.stdin
	if inv.unprivileged && os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running chunkfs %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

const nobody = 65534

// failCase is one command that must fail.
type failCase struct {
	name string
	args []string
	code int    // exit status wanted: 1, or 2 for a bad command line
	err  string // stderr must contain this (the path, or what failed)
	inv  invocation
}

// checkFails runs tc and checks that it fails as wanted and changes
// nothing under root on the cluster c reaches, nor in the local dir.
func checkFails(t *testing.T, c *client.Client, root, local string, tc failCase) {
	t.Helper()
	before, lbefore := remoteTree(t, c, root), localTree(t, local)
	r := runWith(t, tc.inv, tc.args...)
	if r.code != tc.code {
		t.Errorf("%s: chunkfs %s: exit %d, want %d (stderr %q)", tc.name, strings.Join(tc.args, " "), r.code, tc.code, r.stderr)
	}
	msg := strings.TrimSuffix(r.stderr, "\n")
	t.Logf("%s: exit %d: %s", tc.name, r.code, msg)
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("%s: chunkfs %s: stderr is not one line: %q", tc.name, strings.Join(tc.args, " "), r.stderr)
	}
	if !strings.Contains(msg, tc.err) {
		t.Errorf("%s: chunkfs %s: stderr %q does not mention %q", tc.name, strings.Join(tc.args, " "), msg, tc.err)
	}
	if after := remoteTree(t, c, root); after != before {
		t.Errorf("%s: chunkfs %s changed the cluster:\n--- before\n%s--- after\n%s", tc.name, strings.Join(tc.args, " "), before, after)
	}
	if after := localTree(t, local); after != lbefore {
		t.Errorf("%s: chunkfs %s changed the local directory:\n--- before\n%s--- after\n%s", tc.name, strings.Join(tc.args, " "), lbefore, after)
	}
}

// remoteTree describes every entry under root: path, mode, owner, size
// and a digest of each file's contents.
func remoteTree(t *testing.T, c *client.Client, root string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	err := fs.WalkDir(c.FS(ctx), strings.TrimPrefix(root, "/"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fi := info.(*chunkfs.FileInfo)
		fmt.Fprintf(&b, "%s %v %d:%d %d", p, fi.FileMode, fi.UID, fi.GID, fi.Length)
		if fi.FileMode.IsRegular() {
			f, err := c.Open(ctx, "/"+p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", h.Sum(nil)[:8])
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return b.String()
}

// localTree describes every entry under dir: name, mode, size, contents.
func localTree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d", p, info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// localFixtures makes a local directory the unprivileged user can read,
// holding a small file, and returns it.
func localFixtures(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte("small local file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "exists.txt"), []byte("a local file get must not touch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFile writes data to path as the superuser and sets its mode.
func writeFile(t *testing.T, c *client.Client, path string, data []byte, mode fs.FileMode) {
	t.Helper()
	ctx := context.Background()
	f, err := c.Create(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Chmod(ctx, path, mode); err != nil {
		t.Fatal(err)
	}
}

// makeBinaryReachable lets the unprivileged user run the test binary.
func makeBinaryReachable(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCommandFailures(t *testing.T) {
	makeBinaryReachable(t)
	ctx := context.Background()
	c := rootClient(t)
	const root = "/fail"
	for _, d := range []string{root, root + "/dir", root + "/ro", root + "/open"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Chmod(ctx, root+"/open", 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c, root+"/dir/file", []byte("remote file contents\n"), 0o644)
	writeFile(t, c, root+"/ro/file", []byte("read-only to others\n"), 0o644)
	writeFile(t, c, root+"/secret", []byte("root only\n"), 0o600)
	writeFile(t, c, root+"/open/theirs", []byte("not yours to replace\n"), 0o644)
	local := localFixtures(t)
	small := filepath.Join(local, "small.txt")
	long := strings.Repeat("n", 256)
	dead := "127.0.0.1:1" // a privileged port nothing listens on: a free one could be taken by another test's server meanwhile
	user := invocation{unprivileged: true, dir: local}
	cases := []failCase{
		// A missing local source.
		{"put missing local", []string{"put", filepath.Join(local, "missing.txt"), root + "/dir/new"}, 1, "missing.txt", invocation{}},
		{"put missing local among several", []string{"put", small, filepath.Join(local, "missing.txt"), root + "/dir/"}, 1, "missing.txt", invocation{}},
		// A missing remote parent.
		{"put missing parent", []string{"put", small, root + "/nodir/new"}, 1, root + "/nodir/new", invocation{}},
		{"put stdin missing parent", []string{"put", "-", root + "/nodir/new"}, 1, root + "/nodir/new", invocation{stdin: strings.NewReader("data")}},
		{"put several into a missing directory", []string{"put", small, small, root + "/nodir"}, 1, root + "/nodir", invocation{}},
		{"mkdir missing parent", []string{"mkdir", root + "/nodir/sub"}, 1, root + "/nodir/sub", invocation{}},
		{"cp missing parent", []string{"cp", root + "/dir/file", root + "/nodir/copy"}, 1, root + "/nodir/copy", invocation{}},
		{"cp missing source", []string{"cp", root + "/dir/none", root + "/dir/copy"}, 1, root + "/dir/none", invocation{}},
		{"cp a directory", []string{"cp", root + "/dir", root + "/dircopy"}, 1, root + "/dir", invocation{}},
		{"mv missing parent", []string{"mv", root + "/dir/file", root + "/nodir/moved"}, 1, root + "/nodir/moved", invocation{}},
		{"mv missing source", []string{"mv", root + "/dir/none", root + "/dir/moved"}, 1, root + "/dir/none", invocation{}},
		{"append missing parent", []string{"append", root + "/nodir/log"}, 1, root + "/nodir/log", invocation{stdin: strings.NewReader("a\nb\n")}},
		{"get missing remote", []string{"get", root + "/dir/none", filepath.Join(local, "out")}, 1, root + "/dir/none", invocation{}},
		{"get into a missing local directory", []string{"get", root + "/dir/file", filepath.Join(local, "nodir", "out")}, 1, filepath.Join(local, "nodir", "out"), invocation{}},
		{"cat missing", []string{"cat", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"tail missing", []string{"tail", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"records missing", []string{"records", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"ls missing", []string{"ls", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"stat missing", []string{"stat", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"du missing", []string{"du", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"chunks missing", []string{"chunks", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"rm missing", []string{"rm", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"rm -r missing", []string{"rm", "-r", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"chmod missing", []string{"chmod", "600", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		{"chown missing", []string{"chown", "1:1", root + "/dir/none"}, 1, root + "/dir/none", invocation{}},
		// A name too long.
		{"put name too long", []string{"put", small, root + "/dir/" + long}, 1, "longer than 255", invocation{}},
		{"put stdin name too long", []string{"put", "-", root + "/dir/" + long}, 1, "longer than 255", invocation{stdin: strings.NewReader("data")}},
		{"mkdir name too long", []string{"mkdir", root + "/dir/" + long}, 1, "longer than 255", invocation{}},
		{"cp name too long", []string{"cp", root + "/dir/file", root + "/dir/" + long}, 1, "longer than 255", invocation{}},
		{"mv name too long", []string{"mv", root + "/dir/file", root + "/dir/" + long}, 1, "longer than 255", invocation{}},
		{"append name too long", []string{"append", root + "/dir/" + long}, 1, "longer than 255", invocation{stdin: strings.NewReader("a\n")}},
		// Permission denied.
		{"put into a read-only directory", []string{"put", small, root + "/ro/new"}, 1, "permission denied", user},
		{"put over a file not writable", []string{"put", small, root + "/ro/file"}, 1, "permission denied", user},
		{"put over another's file in an open directory", []string{"put", small, root + "/open/theirs"}, 1, "permission denied", user},
		{"cp into a read-only directory", []string{"cp", root + "/dir/file", root + "/ro/new"}, 1, "permission denied", user},
		{"cat a file not readable", []string{"cat", root + "/secret"}, 1, "open " + root + "/secret: permission denied", user},
		{"get a file not readable", []string{"get", root + "/secret", filepath.Join(local, "out")}, 1, "open " + root + "/secret: permission denied", user},
		{"rm in a read-only directory", []string{"rm", root + "/ro/file"}, 1, "permission denied", user},
		{"mkdir in a read-only directory", []string{"mkdir", root + "/ro/sub"}, 1, "permission denied", user},
		{"mv out of a read-only directory", []string{"mv", root + "/ro/file", root + "/open/moved"}, 1, "permission denied", user},
		{"chmod another's file", []string{"chmod", "666", root + "/ro/file"}, 1, "only the owner may change the mode", user},
		{"chown another's file", []string{"chown", "65534", root + "/ro/file"}, 1, "only the superuser may change the owner", user},
		{"append to a file not writable", []string{"append", root + "/ro/file"}, 1, "permission denied", invocation{unprivileged: true, dir: local, stdin: strings.NewReader("a\n")}},
		// The master unreachable.
		{"put master down", []string{"put", small, root + "/dir/new"}, 1, "cannot reach the master", invocation{master: dead}},
		{"get master down", []string{"get", root + "/dir/file", filepath.Join(local, "out")}, 1, "cannot reach the master", invocation{master: dead}},
		{"ls master down", []string{"ls", "/"}, 1, "cannot reach the master", invocation{master: dead}},
		{"mkdir master down", []string{"mkdir", root + "/x"}, 1, "cannot reach the master", invocation{master: dead}},
		{"rm master down", []string{"rm", root + "/dir/file"}, 1, "cannot reach the master", invocation{master: dead}},
		{"append master down", []string{"append", root + "/dir/log"}, 1, "cannot reach the master", invocation{master: dead, stdin: strings.NewReader("a\n")}},
		{"admin report master down", []string{"admin", "report"}, 1, "cannot reach the master", invocation{master: dead}},
		// A bad command line changes nothing either.
		{"put with one operand", []string{"put", small}, 2, "need LOCAL and REMOTE", invocation{}},
		{"put relative remote", []string{"put", small, "dir/x"}, 2, "absolute", invocation{}},
		{"put stdin among several", []string{"put", "-", small, root + "/dir/"}, 2, "stdin", invocation{}},
		{"bad retry timeout", []string{"ls", "--retry-timeout", "0s", "/"}, 2, "retry-timeout", invocation{}},
	}
	for _, tc := range cases {
		if tc.inv.unprivileged && os.Getuid() == 0 {
			tc.inv.dir = local
		}
		checkFails(t, c, root, local, tc)
	}
}

// TestWritesWithoutChunkservers runs the commands that write data on a
// cluster whose chunkservers are all down: each fails, and an overwrite
// leaves the old file whole.
func TestWritesWithoutChunkservers(t *testing.T) {
	cl, c := privateCluster(t)
	old := bytes.Repeat([]byte("old contents "), 100000) // 1.3 MB
	writeFile(t, c, "/w/kept", old, 0o640)
	local := localFixtures(t)
	for i := range cl.Chunkservers() {
		if err := cl.StopChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
	inv := invocation{master: cl.MasterAddr()}
	small := filepath.Join(local, "small.txt")
	cases := []failCase{
		{"put new file", []string{"put", "--retry-timeout", "2s", small, "/w/new"}, 1, "/w/new", inv},
		{"put over a file", []string{"put", "--retry-timeout", "2s", small, "/w/kept"}, 1, "/w/kept", inv},
		{"cp over a file", []string{"cp", "--retry-timeout", "2s", "/w/kept", "/w/copy"}, 1, "/w/kept", inv},
		{"append", []string{"append", "--retry-timeout", "2s", "/w/log"}, 1, "/w/log", invocation{master: cl.MasterAddr(), stdin: strings.NewReader("a\n")}},
	}
	for _, tc := range cases {
		r := runWith(t, tc.inv, tc.args...)
		msg := strings.TrimSuffix(r.stderr, "\n")
		t.Logf("%s: exit %d: %s", tc.name, r.code, msg)
		if r.code != tc.code || msg == "" || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.err) {
			t.Errorf("%s: chunkfs %s: exit %d, stderr %q; want exit %d and one line mentioning %q",
				tc.name, strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.err)
		}
	}
	restartAll(t, cl)
	checkOnly(t, c, "/w", map[string][]byte{"kept": old})
}

// TestFailedOverwriteKeepsOldFile makes the cluster refuse a put half-way
// through an overwrite: the chunkservers stop after the first MiB has
// been sent. The put fails, and the old file is whole afterwards.
func TestFailedOverwriteKeepsOldFile(t *testing.T) {
	cl, c := privateCluster(t)
	old := bytes.Repeat([]byte("the old file "), 300000) // 3.9 MB
	writeFile(t, c, "/w/big", old, 0o644)
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() {
		done <- runWith(t, invocation{master: cl.MasterAddr(), stdin: pr}, "put", "--retry-timeout", "2s", "-", "/w/big")
	}()
	chunk := bytes.Repeat([]byte("new "), 256<<10) // 1 MiB
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	for i := range cl.Chunkservers() {
		if err := cl.StopChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for range 8 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	r := <-done
	pr.Close()
	if r.code != 1 || strings.Count(strings.TrimSuffix(r.stderr, "\n"), "\n") != 0 || !strings.Contains(r.stderr, "/w/big") {
		t.Fatalf("put during an outage: exit %d, stderr %q; want exit 1 and one line naming /w/big", r.code, r.stderr)
	}
	restartAll(t, cl)
	checkOnly(t, c, "/w", map[string][]byte{"big": old})
}

// TestOverwriteKeepsModeAndReplication checks that a put over a file
// keeps the file's permission bits and replication factor.
func TestOverwriteKeepsModeAndReplication(t *testing.T) {
	c := rootClient(t)
	ctx := context.Background()
	if err := c.MkdirAll(ctx, "/keep", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c, "/keep/f", []byte("one"), 0o640)
	if err := c.SetReplication(ctx, "/keep/f", 2); err != nil {
		t.Fatal(err)
	}
	ok(t, "two", "put", "-", "/keep/f")
	fi, err := c.Stat(ctx, "/keep/f")
	if err != nil {
		t.Fatal(err)
	}
	if fi.FileMode.Perm() != 0o640 || fi.Replication != 2 || fi.Length != 3 {
		t.Fatalf("after put over it: mode %v, replication %d, length %d; want -rw-r-----, 2, 3", fi.FileMode, fi.Replication, fi.Length)
	}
	if got := ok(t, "", "cat", "/keep/f"); got != "two" {
		t.Fatalf("cat = %q", got)
	}
	if ents, err := c.ReadDir(ctx, "/keep"); err != nil || len(ents) != 1 {
		t.Fatalf("/keep holds %d entries (%v), want only f", len(ents), err)
	}
}

// privateCluster starts a cluster of its own for a test that stops its
// chunkservers, and a superuser client of it.
func privateCluster(t *testing.T) (*cluster.Cluster, *client.Client) {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.ChunkSize = 1 << 20
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ccfg := client.DefaultConfig()
	ccfg.Master = cl.MasterAddr()
	ccfg.Caller = chunkfs.Root
	c, err := client.New(context.Background(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.MkdirAll(context.Background(), "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	return cl, c
}

func restartAll(t *testing.T, cl *cluster.Cluster) {
	t.Helper()
	for i := range cl.Chunkservers() {
		if err := cl.RestartChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOnly checks that dir holds exactly the files want gives, with
// those contents: no partial copy is left beside them.
func checkOnly(t *testing.T, c *client.Client, dir string, want map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	ents, err := c.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != len(want) {
		t.Errorf("%s holds %q, want only %d files", dir, names, len(want))
	}
	for name, data := range want {
		f, err := c.Open(ctx, dir+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatalf("reading %s/%s: %v", dir, name, err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s/%s: %d bytes, not the %d it held", dir, name, len(got), len(data))
		}
	}
}

func TestAdminHA(t *testing.T) {
	if r := ok(t, "", "admin", "ha"); !strings.Contains(r, "standalone") {
		t.Fatalf("admin ha of a master alone:\n%s", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"admin", "ha", "add-voter", "m2"}, 2, "takes ID HOST:PORT"},
		{[]string{"admin", "ha", "frob"}, 2, "unknown admin ha change"},
		{[]string{"admin", "ha", "add-voter", "m2", "127.0.0.1:1"}, 1, "runs alone"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d and one line mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}

	cfg := cluster.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Masters = 3
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv := invocation{master: cl.MasterAddr()}
	r := runWith(t, inv, "admin", "ha")
	if r.code != 0 || strings.Count(r.stdout, "follower") != 2 || strings.Count(r.stdout, "leader") != 1 {
		t.Fatalf("admin ha of three masters: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	target := (leader + 1) % 3
	if r := runWith(t, inv, "admin", "ha", "transfer-leader", fmt.Sprintf("m%d", target+1)); r.code != 0 {
		t.Fatalf("transfer-leader: exit %d: %s", r.code, r.stderr)
	}
	if now, _ := cl.WaitLeader(ctx); now != target {
		t.Fatalf("after transfer-leader to m%d, m%d leads", target+1, now+1)
	}
	if err := cl.StopGroupMaster(target); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, inv, "mkdir", "/after-failover"); r.code != 0 {
		t.Fatalf("mkdir with the leader down: exit %d: %s", r.code, r.stderr)
	}
	if r := runWith(t, inv, "admin", "ha"); r.code != 0 || !strings.Contains(r.stdout, "unreachable") {
		t.Fatalf("admin ha with a master down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
