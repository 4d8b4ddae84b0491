package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// capture is one process's log, at debug level, safe for concurrent use.
type capture struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *capture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the lines that contain every one of subs.
func (c *capture) lines(subs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range strings.Split(c.b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// hasID reports whether a line carries request ID id (not only one that
// starts with it).
func (c *capture) hasID(id string) bool {
	for _, l := range c.lines("req=" + id) {
		for _, m := range reqAttr.FindAllStringSubmatch(l, -1) {
			if m[1] == id {
				return true
			}
		}
	}
	return false
}

var reqAttr = regexp.MustCompile(`req=([0-9A-Za-z._-]+)`)

// TestRequestIDFollowsAWrite writes a file through a cluster of three
// replicas, with TLS and chunk access tokens, and finds the ID of the
// client's write (its Trace event: the client logs only attempts that
// fail) in the master's log and in every replica's: the push along the
// chain and the primary's Write or a secondary's Apply.
func TestRequestIDFollowsAWrite(t *testing.T) {
	var masterLog, clientLog capture
	csLogs := make([]capture, 3)
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(1<<20), chunkfstest.TLS(), func(c *cluster.Config) {
		c.Tokens = true
		c.Master = func(mc *master.Config) { mc.Logger = masterLog.logger() }
		c.Chunkserver = func(i int, sc *chunkserver.Config) { sc.Logger = csLogs[i].logger() }
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Security, cfg.Logger = tc.MasterAddr(), tc.Security(), clientLog.logger()
	var mu sync.Mutex
	var attempts []client.WriteAttempt
	cfg.Trace = &client.Trace{WriteAttempt: func(a client.WriteAttempt) {
		mu.Lock()
		attempts = append(attempts, a)
		mu.Unlock()
	}}
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	data := randomBytes(7, 300<<10)
	writeFile(t, ctx, c, "/traced", data)
	mu.Lock()
	if len(attempts) != 1 || !reqid.Valid(attempts[0].ReqID) || attempts[0].Err != nil {
		t.Fatalf("want one successful write attempt with a request ID in the client's trace, got %+v", attempts)
	}
	id := "req=" + attempts[0].ReqID
	mu.Unlock()
	if l := clientLog.lines("req="); len(l) != 0 {
		t.Errorf("the client logged a write that went well: %q", l)
	}
	if l := masterLog.lines(id); len(l) == 0 {
		t.Errorf("the master's log has no line with %s", id)
	}
	if testing.Verbose() {
		t.Logf("master: %q\nchunkserver 0: %q", masterLog.lines(id), csLogs[0].lines(id))
	}
	primaries := 0
	for i := range csLogs {
		if l := csLogs[i].lines(`msg="data stream push"`, id, fmt.Sprintf("bytes=%d", len(data))); len(l) != 1 {
			t.Errorf("chunkserver %d: want one push line with %s, got %q", i, id, l)
		}
		write, apply := csLogs[i].lines("method=Write", id), csLogs[i].lines("method=Apply", id)
		primaries += len(write)
		if len(write)+len(apply) != 1 {
			t.Errorf("chunkserver %d: want its Write or Apply with %s, got %q and %q", i, id, write, apply)
		}
	}
	if primaries != 1 {
		t.Errorf("%d primaries logged the write", primaries)
	}

	// A read has an ID of its own, in the master's (location look-up)
	// and the replica's lines.
	f, err := c.Open(ctx, "/traced")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	var readID string
	for i := range csLogs {
		for _, l := range csLogs[i].lines(`msg="data stream read"`) {
			if m := reqAttr.FindStringSubmatch(l); m != nil {
				readID = "req=" + m[1]
			}
		}
	}
	switch {
	case readID == "":
		t.Fatal("no replica logged the read with a request ID")
	case readID == id:
		t.Fatal("the read has the write's ID")
	case len(masterLog.lines(readID)) == 0:
		t.Errorf("the master's log has no line with the read's %s", readID)
	}
}

// TestRequestIDOfBatchedCalls makes concurrent stats, which the client
// sends to the master in batches: each keeps its caller's ID, found in
// the master's log (a batch's op line, or the call's own when alone).
func TestRequestIDOfBatchedCalls(t *testing.T) {
	var masterLog capture
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(1<<20), func(c *cluster.Config) {
		c.Master = func(mc *master.Config) { mc.Logger = masterLog.logger() }
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := tc.Client()
	writeFile(t, ctx, c, "/s", []byte("x"))
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := c.Stat(reqid.With(ctx, fmt.Sprintf("stat-%d", i)), "/s"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		if !masterLog.hasID(fmt.Sprintf("stat-%d", i)) {
			t.Errorf("the master's log has no line of stat %d", i)
		}
	}
	if testing.Verbose() {
		t.Logf("%d batch op lines, %d batch calls with an ID", len(masterLog.lines(`msg="batch op"`)), len(masterLog.lines("method=Batch", "req=")))
	}
}

// TestRequestIDSurvivesRetries writes to a chunk one of whose replicas has
// just stopped: the client logs the failed attempt with the write's ID,
// and the attempt that succeeds, after a fresh lease, has the same one.
func TestRequestIDSurvivesRetries(t *testing.T) {
	var clientLog capture
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(1<<20), chunkfstest.Chunkservers(4))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Security, cfg.Logger, cfg.WriteBuffer = tc.MasterAddr(), tc.Security(), clientLog.logger(), 0
	var mu sync.Mutex
	var attempts []client.WriteAttempt
	cfg.Trace = &client.Trace{WriteAttempt: func(a client.WriteAttempt) {
		mu.Lock()
		attempts = append(attempts, a)
		mu.Unlock()
	}}
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Create(ctx, "/retried")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	replica := attempts[0].Replicas[len(attempts[0].Replicas)-1]
	attempts = nil
	mu.Unlock()
	for i := range 4 {
		if tc.ChunkserverAddr(i) == replica {
			if err := tc.StopChunkserver(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) < 2 || attempts[0].Err == nil || attempts[len(attempts)-1].Err != nil {
		t.Fatalf("want a failed attempt, then a successful one: %+v", attempts)
	}
	id := attempts[0].ReqID
	for _, a := range attempts {
		if a.ReqID != id {
			t.Errorf("attempts of one write have IDs %q and %q", id, a.ReqID)
		}
	}
	if !clientLog.hasID(id) || len(clientLog.lines(`msg="chunkfs write: attempt failed"`, "req="+id)) == 0 {
		t.Errorf("the client's log has no failed attempt with req=%s:\n%q", id, clientLog.lines(""))
	}
}
