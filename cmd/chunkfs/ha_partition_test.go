package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// partition is a network namespace holding one server, joined to the
// test's namespace by a veth pair: the test's side is hostIP, the
// namespace's nsIP. Cut and Heal drop and restore the link.
type partition struct {
	ns, hostLink string
	hostIP, nsIP string
}

// Addresses of the partition test, inside 198.18.0.0/15 (RFC 2544).
const (
	partHostIP = "198.19.77.1"
	partNSIP   = "198.19.77.2"
)

// newPartition creates the namespace and link, removed at cleanup; it
// skips the test when it cannot (not root, no ip, no netns support).
func newPartition(t *testing.T) *partition {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command for a network namespace")
	}
	id := os.Getpid() % 100000
	p := &partition{ns: fmt.Sprintf("adopt-part-%d", id), hostLink: fmt.Sprintf("adp%dh", id),
		hostIP: partHostIP, nsIP: partNSIP}
	nsLink := fmt.Sprintf("adp%dn", id)
	if out, err := exec.Command("ip", "netns", "add", p.ns).CombinedOutput(); err != nil {
		t.Skipf("no network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", p.hostLink).Run()
		exec.Command("ip", "netns", "del", p.ns).Run()
	})
	steps := [][]string{
		{"ip", "link", "add", p.hostLink, "type", "veth", "peer", "name", nsLink},
		{"ip", "link", "set", nsLink, "netns", p.ns},
		{"ip", "addr", "add", p.hostIP + "/30", "dev", p.hostLink},
		{"ip", "link", "set", p.hostLink, "up"},
		{"ip", "netns", "exec", p.ns, "ip", "addr", "add", p.nsIP + "/30", "dev", nsLink},
		{"ip", "netns", "exec", p.ns, "ip", "link", "set", nsLink, "up"},
		{"ip", "netns", "exec", p.ns, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return p
}

// startProc starts a chunkfs process inside the namespace (ip netns exec
// execs it, so the process is the server's).
func (p *partition) startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	pr := &proc{name: name, cmd: exec.Command("ip", append(p.inside(), args...)...)}
	pr.cmd.Stderr = &pr.out
	if err := pr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pr.cmd.Process.Kill()
		pr.cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", pr.name, pr.out.String())
		}
	})
	return pr
}

// inside returns the arguments of ip that run the binary in the namespace.
func (p *partition) inside() []string { return []string{"netns", "exec", p.ns, binary} }

func (p *partition) link(t *testing.T, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "set", p.hostLink, state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", p.hostLink, state, err, out)
	}
}

// Cut drops the link: nothing passes between the namespace and the rest.
func (p *partition) Cut(t *testing.T) { p.link(t, "down") }

// Heal restores the link.
func (p *partition) Heal(t *testing.T) { p.link(t, "up") }

// hostAddr returns a free port on the test's side of the link.
func (p *partition) hostAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(p.hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestHAPartitionedLeaderAcknowledgesNothing: master m1 leads from a
// network namespace of its own; its link is dropped. A client inside that
// namespace, which reaches m1 alone, gets no acknowledgement of a write;
// the other two masters elect a leader that serves clients outside; once
// the link is back, m1 rejoins as a follower that has applied everything
// acknowledged meanwhile, and the write it was sent does not exist.
func TestHAPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six server processes and partitions one")
	}
	p := newPartition(t)
	dir := t.TempDir()
	addrs := []string{net.JoinHostPort(p.nsIP, "17070"), p.hostAddr(t), p.hostAddr(t)}
	var members []string
	for i, a := range addrs {
		members = append(members, fmt.Sprintf("m%d=%s", i+1, a))
	}
	for i, a := range addrs {
		id := fmt.Sprintf("m%d", i+1)
		args := []string{"master", "--id", id, "--dir", filepath.Join(dir, id), "--listen", a,
			"--cluster", strings.Join(members, ","), "--chunk-size", "65536", "--lease", "3s", "--reserve", "0"}
		if i == 0 {
			p.startProc(t, id, args...)
		} else {
			startProc(t, id, args...)
		}
	}
	for i := range 3 {
		startProc(t, fmt.Sprintf("cs%d", i+1), "chunkserver", "--dir", filepath.Join(dir, fmt.Sprintf("cs%d", i+1)),
			"--listen", p.hostAddr(t), "--master", strings.Join(addrs, ","), "--heartbeat", "200ms")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Caller, cfg.LeaderReads = strings.Join(addrs, ","), chunkfs.Root, true
	setup, cancelSetup := context.WithTimeout(ctx, time.Minute)
	defer cancelSetup()
	cl := newHAClient(t, setup, cfg)
	h := &haProcs{addrs: addrs}
	retryUntil(t, setup, "m1 leading", func() error {
		switch h.leader(setup, cl) {
		case 0:
			return nil
		case -1:
			return errors.New("no leader yet")
		}
		return cl.HAChange(setup, "transfer-leader", "m1", "")
	})
	want := map[string][]byte{}
	put := func(cl *client.Client, name string) {
		t.Helper()
		data := bytes.Repeat([]byte(name), 1000)
		retryUntil(t, ctx, "write "+name, func() error { return writeWhole(ctx, cl, name, data) })
		want[name] = data
	}
	put(cl, "/before")

	p.Cut(t)
	cut := time.Now()
	// Inside the namespace: a client that reaches m1 only.
	local := filepath.Join(dir, "isolated")
	os.WriteFile(local, []byte("never acknowledged"), 0o644)
	cctx, ccancel := context.WithTimeout(ctx, 40*time.Second)
	defer ccancel()
	run := exec.CommandContext(cctx, "ip", append(p.inside(), "put", "--master", addrs[0],
		"--retry-timeout", "10s", local, "/isolated")...)
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	err := run.Run()
	if err == nil {
		t.Fatalf("the partitioned leader acknowledged a write:\n%s", out.String())
	}
	t.Logf("write through the partitioned leader failed after %v: %v: %s", time.Since(cut).Round(time.Millisecond), err, strings.TrimSpace(out.String()))

	// Outside: the two others elect a leader that serves.
	ocfg := cfg
	ocfg.Master = strings.Join(addrs[1:], ",")
	outside := newHAClient(t, ctx, ocfg)
	for i := range 3 {
		put(outside, fmt.Sprintf("/during-%d", i))
	}
	t.Logf("three files acknowledged by the new leader %v after the cut", time.Since(cut).Round(time.Millisecond))

	p.Heal(t)
	retryUntil(t, ctx, "m1 back as a follower that caught up", func() error {
		st, err := outside.HAStatusOf(ctx, addrs[0])
		switch {
		case err != nil:
			return err
		case st.Role != "follower" || st.Applied < uint64(outside.StateID()):
			return fmt.Errorf("m1 is %s at %d, want a follower at %d", st.Role, st.Applied, outside.StateID())
		}
		return nil
	})
	// m1 alone (a follower answers stats once it has applied the state
	// the client has seen) knows every acknowledged file; the group
	// serves their data.
	rcfg := cfg
	rcfg.Master, rcfg.LeaderReads = addrs[0], false
	viaOld := newHAClient(t, ctx, rcfg)
	for name, data := range want {
		var fi *chunkfs.FileInfo
		retryUntil(t, ctx, "stat "+name+" through m1", func() (err error) {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			fi, err = viaOld.Stat(sctx, name)
			return err
		})
		if fi.Size() != int64(len(data)) {
			t.Fatalf("%s through m1: size %d, want %d", name, fi.Size(), len(data))
		}
		if got, err := readWhole(ctx, outside, name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (%v), want the %d written", name, len(got), err, len(data))
		}
	}
	if _, err := outside.Stat(ctx, "/isolated"); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("the write sent to the partitioned leader: stat says %v, want not found", err)
	}
}

func writeWhole(ctx context.Context, cl *client.Client, name string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f, err := cl.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readWhole(ctx context.Context, cl *client.Client, name string) ([]byte, error) {
	f, err := cl.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
