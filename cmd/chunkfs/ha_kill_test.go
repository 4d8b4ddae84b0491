package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

var haWriters = flag.Int("ha.writers", 16, "concurrent creators and writers in TestHAKillLeaderProcess (the issue's long form: 64)")

// proc is a chunkfs server process started by a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  syncBuffer // stderr, shown when the test fails
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(binary, args...)}
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// haProcs is a group of three master processes and three chunkserver
// processes on loopback ports.
type haProcs struct {
	addrs   []string // the masters' addresses, m1…m3
	masters []*proc
}

func startHAProcs(t *testing.T) *haProcs {
	t.Helper()
	dir := t.TempDir()
	h := &haProcs{}
	var members []string
	for i := range 3 {
		h.addrs = append(h.addrs, freeAddr(t))
		members = append(members, fmt.Sprintf("m%d=%s", i+1, h.addrs[i]))
	}
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		h.masters = append(h.masters, startProc(t, id, "master", "--id", id,
			"--dir", filepath.Join(dir, id), "--listen", h.addrs[i], "--cluster", strings.Join(members, ","),
			"--chunk-size", "65536", "--lease", "3s", "--reserve", "0"))
	}
	for i := range 3 {
		startProc(t, fmt.Sprintf("cs%d", i+1), "chunkserver", "--dir", filepath.Join(dir, fmt.Sprintf("cs%d", i+1)),
			"--listen", freeAddr(t), "--master", strings.Join(h.addrs, ","), "--heartbeat", "200ms")
	}
	return h
}

// leader returns the index of the master process that says it leads, or -1.
func (h *haProcs) leader(ctx context.Context, cl *client.Client) int {
	for i, a := range h.addrs {
		if st, err := cl.HAStatusOf(ctx, a); err == nil && st.Role == "leader" {
			return i
		}
	}
	return -1
}

// haContent is file g/i's content: its name repeated, so a file cut short
// or holding another's data shows.
func haContent(g, i int) []byte {
	n := 20<<10 + (g*7919+i*104729)%(120<<10) // up to three 64 KiB chunks
	return bytes.Repeat([]byte(fmt.Sprintf("w%03d/f%05d;", g, i)), n/12+1)[:n]
}

// TestHAKillLeaderProcess runs three `chunkfs master` processes as a group
// and three chunkserver processes, has many client goroutines create and
// write files, and SIGKILLs the leader's process mid-run. The writers must
// go on against the new leader within their calls' deadlines, and every
// file whose create, write and close were acknowledged must read back whole.
func TestHAKillLeaderProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six server processes")
	}
	h := startHAProcs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Master = strings.Join(h.addrs, ",")
	cfg.Caller = chunkfs.Root
	setup, cancelSetup := context.WithTimeout(ctx, time.Minute)
	defer cancelSetup()
	cl := newHAClient(t, setup, cfg)
	retryUntil(t, setup, "a first file written", func() error {
		f, err := cl.Create(ctx, "/ready")
		if err == nil {
			_, err = f.Write([]byte("ready"))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		return err
	})

	writers := *haWriters
	const perWriterBefore, perWriterAfter = 3, 3
	var (
		mu       sync.Mutex // guards acked, errs, killedAt, firstAfter, lastBefore
		acked    = map[[2]int]bool{}
		errs     []string
		killedAt time.Time
		// per writer: when its last op before the kill and its first op
		// after the kill were acknowledged
		lastBefore = make([]time.Time, writers)
		firstAfter = make([]time.Time, writers)
	)
	before, after := make(chan struct{}, writers), make(chan struct{}, writers)
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nBefore, nAfter := 0, 0
			for i := 0; nAfter < perWriterAfter && ctx.Err() == nil; i++ {
				start := time.Now()
				err := writeHAFile(ctx, cl, g, i)
				now := time.Now()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("w%d/f%d: %v", g, i, err))
				} else {
					acked[[2]int{g, i}] = true
					if killedAt.IsZero() || now.Before(killedAt) {
						lastBefore[g] = now
					} else if firstAfter[g].IsZero() && start.After(killedAt) {
						firstAfter[g] = now // a file wholly written after the kill
					}
				}
				mu.Unlock()
				if err != nil {
					continue
				}
				select {
				case <-killed:
					if nAfter++; nAfter == perWriterAfter {
						after <- struct{}{}
					}
				default:
					if nBefore++; nBefore == perWriterBefore {
						before <- struct{}{}
					}
				}
			}
		}()
	}
	for range writers {
		select {
		case <-before:
		case <-ctx.Done():
			t.Fatal("writers did not get going")
		}
	}
	old := h.leader(ctx, cl)
	if old < 0 {
		t.Fatal("no master process says it leads")
	}
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	if err := h.masters[old].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(killed)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("writers did not finish against the new leader; errors: %v", errs)
	}
	next := h.leader(ctx, cl)
	if next < 0 || next == old {
		t.Fatalf("after SIGKILL of m%d the leader is %d", old+1, next)
	}

	// The failover gap each writer saw: from its last acknowledgement
	// before the kill to that of its first file begun after it.
	var worst, sum time.Duration
	for g := range writers {
		gap := firstAfter[g].Sub(lastBefore[g])
		if firstAfter[g].IsZero() || lastBefore[g].IsZero() {
			t.Fatalf("writer %d has no acknowledgement on one side of the kill", g)
		}
		sum += gap
		worst = max(worst, gap)
	}
	var firstAny time.Time
	for _, f := range firstAfter {
		if firstAny.IsZero() || f.Before(firstAny) {
			firstAny = f
		}
	}
	t.Logf("%d writers, %d files acknowledged, %d calls failed; SIGKILL of m%d, m%d leads; first file begun after the kill acknowledged %v after it; writers' gaps: mean %v, worst %v",
		writers, len(acked), len(errs), old+1, next+1, firstAny.Sub(killedAt).Round(time.Millisecond),
		(sum / time.Duration(writers)).Round(time.Millisecond), worst.Round(time.Millisecond))
	// A call in flight at the kill may fail (its create may have been
	// applied without the answer reaching the client); no writer fails
	// more than that one call.
	if len(errs) > writers {
		t.Errorf("%d failed calls for %d writers: %v", len(errs), writers, errs)
	}
	for _, e := range errs {
		t.Logf("failed: %s", e)
	}

	reader := newHAClient(t, ctx, cfg)
	for k := range acked {
		got, err := readHAFile(ctx, reader, k[0], k[1])
		if err != nil {
			t.Errorf("acknowledged w%d/f%d: %v", k[0], k[1], err)
		} else if want := haContent(k[0], k[1]); !bytes.Equal(got, want) {
			t.Errorf("acknowledged w%d/f%d: read %d bytes, not the %d written", k[0], k[1], len(got), len(want))
		}
	}
}

func newHAClient(t *testing.T, ctx context.Context, cfg client.Config) *client.Client {
	t.Helper()
	var cl *client.Client
	retryUntil(t, ctx, "a client of the group", func() (err error) {
		cl, err = client.New(ctx, cfg)
		return err
	})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// writeHAFile creates, writes and closes file g/i, each call with a
// deadline well beyond a failover's.
func writeHAFile(ctx context.Context, cl *client.Client, g, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f, err := cl.Create(ctx, fmt.Sprintf("/w%03d-f%05d", g, i))
	if err != nil {
		return err
	}
	if _, err := f.Write(haContent(g, i)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readHAFile(ctx context.Context, cl *client.Client, g, i int) ([]byte, error) {
	f, err := cl.Open(ctx, fmt.Sprintf("/w%03d-f%05d", g, i))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// retryUntil retries try until it succeeds or ctx ends.
func retryUntil(t *testing.T, ctx context.Context, what string, try func() error) {
	t.Helper()
	for {
		err := try()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
