package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/loopback"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The CLI tests drive the real binary, built once, against one in-process
// cluster shared by the tests (each test works in its own directory).
var (
	binary      string
	testCluster *cluster.Cluster
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "chunkfs-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The shared test cluster runs plain TCP: every run of the binary is
	// told so (TLS tests give --tls-dir, which takes precedence).
	os.Setenv("CHUNKFS_INSECURE", "1")
	binary = filepath.Join(dir, "chunkfs")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building chunkfs: %v\n%s", err, out)
		return 1
	}
	cfg := cluster.DefaultConfig()
	cfg.Dir = filepath.Join(dir, "cluster")
	cfg.ChunkSize = 256 << 10
	testCluster, err = cluster.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting a cluster:", err)
		return 1
	}
	defer testCluster.Close()
	return m.Run()
}

// result is what one run of the binary did.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary with args and stdin, against the test cluster.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runWith(t, invocation{stdin: strings.NewReader(stdin)}, args...)
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runCLI(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("chunkfs %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// rootClient is a Go client acting as the superuser, to set what the CLI
// cannot (times) so golden outputs are stable.
func rootClient(t *testing.T) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Master = testCluster.MasterAddr()
	cfg.Caller = chunkfs.Root
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pin gives paths fixed owners and times.
func pin(t *testing.T, paths ...string) {
	t.Helper()
	c := rootClient(t)
	for _, p := range paths {
		if err := c.Chown(context.Background(), p, 1000, 100); err != nil {
			t.Fatal(err)
		}
		if err := c.Chtimes(context.Background(), p, fixedTime, fixedTime); err != nil {
			t.Fatal(err)
		}
	}
}

var inodes = regexp.MustCompile(`(Inode: +|"inode": )\d+`)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = inodes.ReplaceAllString(got, "${1}N")
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func TestGoldenListingAndStat(t *testing.T) {
	ok(t, "", "mkdir", "-p", "/golden/sub")
	ok(t, "hello\n", "put", "-", "/golden/hello.txt")
	ok(t, strings.Repeat("z", 300000), "put", "-", "/golden/big")
	ok(t, "", "chmod", "640", "/golden/big")
	pin(t, "/golden/sub", "/golden/hello.txt", "/golden/big")
	golden(t, "ls-l.golden", ok(t, "", "ls", "-l", "/golden"))
	golden(t, "ls-json.golden", ok(t, "", "ls", "--json", "/golden"))
	golden(t, "stat.golden", ok(t, "", "stat", "/golden/big"))
	golden(t, "stat-json.golden", ok(t, "", "stat", "--json", "/golden/hello.txt"))
	golden(t, "du.golden", ok(t, "", "du", "-h", "/golden"))
}

func TestPutGetCatRoundTrip(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 70000) // > 4 chunks
	local := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, "", "mkdir", "/rt")
	ok(t, "", "put", local, "/rt/")
	ok(t, "", "get", "/rt/in.bin", filepath.Join(dir, "out.bin"))
	got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("get returned %d bytes (err %v), differing from put", len(got), err)
	}
	if out := ok(t, "", "cat", "/rt/in.bin"); out != string(data) {
		t.Fatal("cat differs from put")
	}
	ok(t, "", "cp", "/rt/in.bin", "/rt/copy.bin")
	ok(t, "", "mv", "/rt/copy.bin", "/rt/moved.bin")
	if out := ok(t, "", "tail", "-c", "10", "/rt/moved.bin"); out != string(data[len(data)-10:]) {
		t.Fatalf("tail = %q", out)
	}
	if out := ok(t, "", "ls", "/rt"); out != "in.bin\nmoved.bin\n" {
		t.Fatalf("ls = %q", out)
	}
	if out := ok(t, "", "chunks", "/rt/in.bin"); strings.Count(out, "\n") != 6 {
		t.Fatalf("chunks printed:\n%s", out)
	}
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "sub", "leaf"), []byte("leaf"), 0o644)
	ok(t, "", "put", tree, "/rt")
	if out := ok(t, "", "cat", "/rt/tree/sub/leaf"); out != "leaf" {
		t.Fatalf("put of a directory: cat = %q", out)
	}
	back := filepath.Join(dir, "back")
	ok(t, "", "get", "/rt/tree", back)
	if b, err := os.ReadFile(filepath.Join(back, "sub", "leaf")); err != nil || string(b) != "leaf" {
		t.Fatalf("get of a directory: %q, %v", b, err)
	}
	ok(t, "", "rm", "-r", "/rt")
	if r := runCLI(t, "", "ls", "/rt"); r.code != 1 {
		t.Fatalf("ls of a removed directory: exit %d", r.code)
	}
}

func TestAppendRecords(t *testing.T) {
	// New files on every run: the cluster outlives one run with -count.
	records, blocks := fmt.Sprintf("/records-%d.log", time.Now().UnixNano()), fmt.Sprintf("/blocks-%d.log", time.Now().UnixNano())
	var in strings.Builder
	for i := range 500 {
		fmt.Fprintf(&in, "record-%d\n", i)
	}
	ok(t, in.String(), "append", records)
	out := ok(t, "", "records", records)
	if out != in.String() {
		t.Fatalf("records printed %d lines, want 500", strings.Count(out, "\n"))
	}
	ok(t, "abcdefghij", "append", "--record-size", "4", blocks)
	if out := ok(t, "", "records", blocks); out != "abcd\nefgh\nij\n" {
		t.Fatalf("records of blocks = %q", out)
	}
	if out := ok(t, "", "records", "--json", blocks); !strings.Contains(out, `"data":"abcd"`) {
		t.Fatalf("records --json = %s", out)
	}
}

func TestAdminReport(t *testing.T) {
	out := ok(t, "", "admin", "report", "--json")
	if strings.Count(out, `"alive": true`) != 3 {
		t.Fatalf("admin report --json:\n%s", out)
	}
	if out := ok(t, "", "admin", "report"); !strings.Contains(out, "3 alive, 0 dead") {
		t.Fatalf("admin report:\n%s", out)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		err  string // in stderr
	}{
		{[]string{"cat", "/no/such/file"}, 1, "no such file"},
		{[]string{"ls", "relative"}, 2, "absolute"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"mkdir"}, 2, "missing PATH"},
		{[]string{"ls", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"chmod", "999", "/x"}, 2, "bad mode"},
		{[]string{"mkdir", "/"}, 1, "exists"},
		{[]string{"ls", "--master", "127.0.0.1:1", "/"}, 1, ""},
	}
	for _, tc := range cases {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
		if r.code != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: error is not one line: %q", tc.args, r.stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	for name := range commandTable() {
		r := runCLI(t, "", name, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: chunkfs "+name) || !strings.Contains(r.stdout, "Example:") {
			t.Errorf("chunkfs %s --help: exit %d, output:\n%s", name, r.code, r.stdout)
		}
	}
	if r := runCLI(t, "", "help"); r.code != 0 || !strings.Contains(r.stdout, "Commands:") {
		t.Errorf("chunkfs help: exit %d\n%s", r.code, r.stdout)
	}
	// Each bench subcommand's --help shows its own flags.
	for sub, flag := range map[string]string{"gfs": "-write-chunk-size", "recovery": "-baseline", "observers": "-rate", "metadata": "-fleet", "smallfile": "-drop-caches"} {
		if r := runCLI(t, "", "bench", sub, "--help"); r.code != 0 || !strings.Contains(r.stdout, flag) {
			t.Errorf("chunkfs bench %s --help: exit %d, no %s in:\n%s", sub, r.code, flag, r.stdout)
		}
	}
}

func TestTailFollow(t *testing.T) {
	ok(t, "first\n", "put", "-", "/follow.log")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "tail", "-f", "--interval", "20ms", "/follow.log")
	cmd.Env = append(os.Environ(), "CHUNKFS_MASTER="+testCluster.MasterAddr())
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "first\n")
	c := rootClient(t)
	f, err := c.OpenFile(ctx, "/follow.log", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("second\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "first\nsecond\n")
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail -f after Ctrl-C: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until out holds want, failing the test after 30 s.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for out.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("output %q, want %q", out.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTreeCommands(t *testing.T) {
	ok(t, "", "mkdir", "-p", "/tree/a/b", "/tree/c")
	ok(t, "12345", "put", "-", "/tree/a/b/f")
	ok(t, "678", "put", "-", "/tree/c/g")
	want := "/tree:\na\nc\n\n/tree/a:\nb\n\n/tree/a/b:\nf\n\n/tree/c:\ng\n"
	if out := ok(t, "", "ls", "-R", "/tree"); out != want {
		t.Fatalf("ls -R =\n%s\nwant\n%s", out, want)
	}
	if out := ok(t, "", "du", "-s", "/tree"); out != "8\t/tree\n" {
		t.Fatalf("du -s = %q", out)
	}
	ok(t, "", "chown", "root:0", "/tree/c/g")
	ok(t, "", "chown", "7", "/tree/c/g")
	ok(t, "", "mv", "/tree/c/g", "/tree/a")
	if out := ok(t, "", "cat", "/tree/a/g"); out != "678" {
		t.Fatalf("cat after mv into a directory = %q", out)
	}
	if r := runCLI(t, "", "rm", "/tree/a"); r.code != 1 || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("rm of a non-empty directory: exit %d, %q", r.code, r.stderr)
	}
	ok(t, "", "rm", "-f", "/tree/missing")
	if r := runCLI(t, "", "rm", "-r", "/tree/missing"); r.code != 1 {
		t.Fatalf("rm -r of a missing path: exit %d", r.code)
	}
	ok(t, "", "rm", "-r", "/tree")
}

// TestDev runs `chunkfs dev`, stores a file, stops it with Ctrl-C, starts
// it again on the same directory and reads the file back.
func TestDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a whole cluster")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	devRun := func(check func()) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "dev", "--dir", dir, "--listen", addr, "--chunk-size", "65536")
		var out syncBuffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "Ctrl-C stops the cluster") {
			if time.Now().After(deadline) {
				t.Fatalf("chunkfs dev did not start; output:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		check()
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("chunkfs dev after Ctrl-C: %v\n%s", err, out.String())
		}
	}
	data := strings.Repeat("persistent ", 20000) // several 64 KiB chunks
	devRun(func() { ok(t, data, "--master", addr, "put", "-", "/kept") })
	devRun(func() {
		if got := ok(t, "", "--master", addr, "cat", "/kept"); got != data {
			t.Fatalf("after a restart read %d bytes, want %d", len(got), len(data))
		}
	})
}

// freeAddr returns a loopback address free just now, for a server that
// may be restarted on it (internal/loopback).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestTailAndRecordsFollowRecords(t *testing.T) {
	ok(t, "one\ntwo\n", "append", "/follow.rec")
	if out := ok(t, "", "tail", "/follow.rec"); out != "one\ntwo\n" {
		t.Fatalf("tail of a record file = %q, want its records", out)
	}
	if out := ok(t, "", "tail", "--raw", "-c", "4", "/follow.rec"); len(out) != 4 || !strings.HasSuffix(out, "two") {
		t.Fatalf("tail --raw -c 4 = %q, want the last 4 raw bytes (a CRC byte and \"two\")", out)
	}
	want := "one\ntwo\n"
	for i, args := range [][]string{
		{"tail", "-f", "--interval", "20ms", "/follow.rec"},
		{"records", "-f", "--interval", "20ms", "/follow.rec"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = append(os.Environ(), "CHUNKFS_MASTER="+testCluster.MasterAddr())
		var out syncBuffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, &out, want)
		more := fmt.Sprintf("more %d\n", i)
		ok(t, more, "append", "/follow.rec")
		want += more
		waitFor(t, &out, want)
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v after Ctrl-C: %v", args, err)
		}
		cancel()
	}
	ok(t, "", "rm", "/follow.rec")
}

func TestNamesAreQuoted(t *testing.T) {
	ok(t, "", "mkdir", "-p", "/quoted")
	ok(t, "x", "put", "-", "/quoted/a\nb")
	ok(t, "x", "put", "-", "/quoted/\x1b[31mred")
	got := ok(t, "", "ls", "/quoted")
	if got != "$'\\x1b[31mred'\n$'a\\nb'\n" {
		t.Fatalf("ls of control-character names = %q", got)
	}
	if !strings.Contains(ok(t, "", "ls", "--json", "/quoted"), `"name": "a\nb"`) {
		t.Fatal("ls --json does not carry the name exactly")
	}
}

func TestQuoteName(t *testing.T) {
	for in, want := range map[string]string{
		"plain":      "plain",
		"with space": "with space",
		"é ünïcode":  "é ünïcode",
		"tab\there":  `$'tab\there'`,
		"it's\n":     `$'it\'s\n'`,
		"bad\xffutf": `$'bad\xffutf'`,
		"\x7f":       `$'\x7f'`,
	} {
		if got := quoteName(in); got != want {
			t.Errorf("quoteName(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ok(t, "", "cert", "init", "--dir", dir)
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "chunkserver", "--name", "cs1", "--host", "127.0.0.1")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "client", "--name", "alice", "--uid", "1000", "--gids", "1000,27")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "mount", "--name", "gw", "--uid", "0")
	ok(t, "", "cert", "issue", "--dir", dir, "--role", "mount", "--name", "laptop", "--uid", "1000", "--no-proxy")
	for name, proxy := range map[string]bool{"gw": true, "laptop": false, "alice": false} {
		sec, err := rpc.LoadSecurity(filepath.Join(dir, name))
		if err != nil || sec.Identity().Proxy != proxy {
			t.Errorf("%s: %v, proxy %v; want %v", name, err, sec.Identity().Proxy, proxy)
		}
	}
	for _, f := range []string{"ca.key", "cs1/tls.key", "alice/tls.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", f, err, st.Mode())
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"cert"}, 2, "need init, issue or revoke"},
		{[]string{"cert", "sign"}, 2, "need init, issue or revoke"},
		{[]string{"cert", "init", "--dir", dir}, 1, "file already exists"},
		{[]string{"cert", "issue", "--dir", dir, "--role", "client", "--name", "alice", "--uid", "1"}, 1, "file already exists"},
		{[]string{"cert", "issue", "--dir", dir, "--role", "admin", "--name", "x"}, 2, "unknown role"},
		{[]string{"cert", "issue", "--dir", dir, "--role", "client", "--name", "bob", "--gids", "x"}, 2, "bad group"},
		{[]string{"cert", "issue", "--dir", filepath.Join(dir, "none"), "--role", "client", "--name", "bob"}, 1, "no such file"},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("chunkfs %v: exit %d, stderr %q; want exit %d and one line mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
}
