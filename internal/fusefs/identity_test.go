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
