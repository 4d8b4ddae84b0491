package fusefs

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// TestPlainCertificateMountActsOnlyAsItsUser mounts a TLS cluster with a
// plain (non-proxy) user certificate of uid 1000, letting other users in
// (allow_other): processes of uid 1000 act as the certificate's identity,
// whatever their own groups; every other user, root included, gets
// EACCES, even on a world-readable file, and changes nothing.
func TestPlainCertificateMountActsOnlyAsItsUser(t *testing.T) {
	needFuse(t)
	if os.Getuid() != 0 {
		t.Skip("runs processes as other users: needs root")
	}
	cfg := cluster.DefaultConfig()
	cfg.Dir, cfg.ChunkSize, cfg.TLS = t.TempDir(), testChunkSize, true
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rcfg := client.DefaultConfig()
	rcfg.Master, rcfg.Caller, rcfg.Security = c.MasterAddr(), chunkfs.Root, c.Security()
	root, err := client.New(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	put := func(path string, data string, mode fs.FileMode, uid int) {
		t.Helper()
		f, err := root.Create(ctx, path)
		if err == nil {
			_, err = f.Write([]byte(data))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil {
			err = root.Chmod(ctx, path, mode)
		}
		if err == nil {
			err = root.Chown(ctx, path, uid, uid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := root.Mkdir(ctx, "/alice", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := root.Chown(ctx, "/alice", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	put("/alice/f", "alice's data\n", 0o600, 1000)
	put("/pub", "public\n", 0o644, 0)

	sec, err := c.IssueCertificate(certs.Identity{Role: certs.RoleMount, Name: "laptop", UID: 1000, GIDs: []uint32{1000}})
	if err != nil {
		t.Fatal(err)
	}
	cc := client.DefaultConfig() // the process's caller is root's: the certificate decides
	cc.Master, cc.Security, cc.RetryTimeout, cc.Logger = c.MasterAddr(), sec, 20*time.Second, testLogger(t)
	b, err := NewClientBackend(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mcfg := DefaultConfig().NoCache()
	mcfg.AllowOther, mcfg.OpTimeout = true, 20*time.Second
	mnt := mountT(t, b, mcfg)
	if err := os.Chmod(filepath.Dir(mnt), 0o755); err != nil { // let the other users reach the mount point
		t.Fatal(err)
	}

	sh := func(cred *syscall.Credential, script string) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Dir = "/"
		cmd.Env = []string{"M=" + mnt, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	alice := &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{27}} // 27: a group her certificate lacks
	if out, err := sh(alice, `cat "$M/alice/f" && echo new > "$M/alice/g" && stat -c %u:%g "$M/alice/g" && cat "$M/pub"`); err != nil ||
		out != "alice's data\n1000:1000\npublic\n" {
		t.Errorf("alice through her mount: %v\n%s", err, out)
	}
	bob := &syscall.Credential{Uid: 1001, Gid: 1001}
	for _, script := range []string{`cat "$M/pub"`, `ls "$M"`, `cat "$M/alice/f"`, `echo x > "$M/bob"`, `mkdir "$M/d"`, `stat "$M/pub"`} {
		out, err := sh(bob, script)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("bob: %s: %v, %q; want Permission denied", script, err, out)
		}
	}
	// Root's processes too; only the mount's own process, which holds
	// the certificate's key, acts as the certificate.
	if out, err := sh(&syscall.Credential{Uid: 0, Gid: 0}, `cat "$M/pub"`); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("root reading through alice's mount: %v, %q; want Permission denied", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(mnt, "pub")); err != nil || string(data) != "public\n" {
		t.Errorf("the mount's own process reading: %q, %v", data, err)
	}
	for _, p := range []string{"/bob", "/d"} {
		if _, err := root.Stat(ctx, p); chunkfs.KindOf(err) != chunkfs.KindNotExist {
			t.Errorf("%s after bob's refused calls: %v", p, err)
		}
	}
	if fi, err := root.Stat(ctx, "/alice/g"); err != nil || fi.UID != 1000 {
		t.Errorf("alice's new file: %+v, %v", fi, err)
	}
}

// TestProxyMountChecksEachUser mounts a TLS cluster with a gateway's
// certificate that carries the proxy privilege, letting other users in
// (allow_other): each local user's request acts as that user, so bob
// cannot read, list, write or delete alice's 0600 file or 0700
// directory (EACCES) and changes nothing, while alice can; a process
// cannot take a UID its kernel credentials do not have.
func TestProxyMountChecksEachUser(t *testing.T) {
	needFuse(t)
	if os.Getuid() != 0 {
		t.Skip("runs processes as other users: needs root")
	}
	cfg := cluster.DefaultConfig()
	cfg.Dir, cfg.ChunkSize, cfg.TLS = t.TempDir(), testChunkSize, true
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sec, err := c.IssueCertificate(certs.Identity{Role: certs.RoleMount, Name: "gw", GIDs: []uint32{0}, Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	cc := client.DefaultConfig()
	cc.Master, cc.Security, cc.RetryTimeout, cc.Logger = c.MasterAddr(), sec, 20*time.Second, testLogger(t)
	b, err := NewClientBackend(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mcfg := DefaultConfig().NoCache()
	mcfg.AllowOther, mcfg.OpTimeout = true, 20*time.Second
	mnt := mountT(t, b, mcfg)
	if err := os.Chmod(filepath.Dir(mnt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mnt, 0o777|os.ModeSticky); err != nil { // everyone may create at the top, as in /tmp
		t.Fatal(err)
	}
	if fi, err := os.Stat(mnt); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("the mount's root after chmod 1777: %v, %v", fi.Mode(), err)
	}
	sh := func(cred *syscall.Credential, script string) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Dir = "/"
		cmd.Env = []string{"M=" + mnt, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	alice := &syscall.Credential{Uid: 1000, Gid: 1000}
	bob := &syscall.Credential{Uid: 1001, Gid: 1001}
	if out, err := sh(alice, `mkdir -m 700 "$M/alice" && echo secret > "$M/alice/f" && echo mine > "$M/af" && chmod 600 "$M/af" && stat -c %u:%a "$M/af" "$M/alice"`); err != nil ||
		out != "1000:600\n1000:700\n" {
		t.Fatalf("alice through the gateway: %v\n%s", err, out)
	}
	for _, script := range []string{
		`cat "$M/af"`, `cat "$M/alice/f"`, `ls "$M/alice"`, `stat "$M/alice/f"`,
		`echo bob >> "$M/af"`, `echo bob > "$M/alice/g"`, `rm -f "$M/af"`, `rm -rf "$M/alice"`,
		`chmod 666 "$M/af"`, `mv "$M/af" "$M/bf"`,
	} {
		out, err := sh(bob, script)
		if err == nil || !strings.Contains(out, "Permission denied") && !strings.Contains(out, "Operation not permitted") {
			t.Errorf("bob: %s: %v, %q; want Permission denied", script, err, out)
		}
	}
	if out, err := sh(bob, `echo bob > "$M/bf" && stat -c %u "$M/bf"`); err != nil || out != "1001\n" {
		t.Errorf("bob's own file through the gateway: %v, %q", err, out)
	}
	rcfg := client.DefaultConfig()
	rcfg.Master, rcfg.Caller, rcfg.Security = c.MasterAddr(), chunkfs.Root, c.Security()
	root, err := client.New(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for p, want := range map[string]string{"/af": "mine\n", "/alice/f": "secret\n"} {
		if got, err := readAllClient(ctx, root, p); err != nil || string(got) != want {
			t.Errorf("%s after bob's refused calls: %q, %v", p, got, err)
		}
	}
	if _, err := root.Stat(ctx, "/alice/g"); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("/alice/g after bob's refused write: %v", err)
	}
	if out, err := sh(alice, `cat "$M/af" "$M/alice/f"`); err != nil || out != "mine\nsecret\n" {
		t.Errorf("alice after bob's attempts: %v, %q", err, out)
	}
}
