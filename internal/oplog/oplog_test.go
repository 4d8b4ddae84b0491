package oplog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hashicorp/raft"
)

// listFSM records every command; its result is the number of commands so
// far.
type listFSM struct {
	mu    sync.Mutex // guards cmds and index
	cmds  []string
	index uint64
}

func (f *listFSM) Apply(index uint64, cmd []byte) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(cmd))
	f.index = index
	return len(f.cmds)
}

func (f *listFSM) Snapshot(w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := io.WriteString(w, strings.Join(f.cmds, "\n"))
	return err
}

func (f *listFSM) Restore(index uint64, r io.Reader) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds, f.index = nil, index
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f.cmds = append(f.cmds, sc.Text())
	}
	return sc.Err()
}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

func open(t testing.TB, dir string, fsm FSM) *Log {
	t.Helper()
	cfg := DefaultConfig(dir)
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Open(ctx, cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestApplyRestartAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	fsm := &listFSM{}
	l := open(t, dir, fsm)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				res, idx, err := l.Apply(context.Background(), fmt.Appendf(nil, "g%d-%d", g, i))
				if err != nil || res.(int) < 1 || idx == 0 {
					t.Errorf("Apply = %v, %d, %v", res, idx, err)
				}
			}
		}()
	}
	wg.Wait()
	want := fsm.list()
	if len(want) != 200 {
		t.Fatalf("applied %d commands, want 200", len(want))
	}
	if l.LastApplied() < 1 || !l.IsLeader() {
		t.Errorf("LastApplied %d, leader %v", l.LastApplied(), l.IsLeader())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the log replays into a fresh FSM.
	fsm2 := &listFSM{}
	l = open(t, dir, fsm2)
	if got := fsm2.list(); !slices.Equal(got, want) {
		t.Fatalf("after restart: %d commands, want %d", len(got), len(want))
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snapIndex := l.LastApplied()
	l.Apply(context.Background(), []byte("after-snapshot"))
	l.Close()

	// Restart again: snapshot plus tail.
	fsm3 := &listFSM{}
	l = open(t, dir, fsm3)
	defer l.Close()
	got := fsm3.list()
	if len(got) != 201 || got[200] != "after-snapshot" || fsm3.index <= snapIndex {
		t.Fatalf("after snapshot restart: %d commands, index %d (snapshot at %d)", len(got), fsm3.index, snapIndex)
	}
	if !Exists(dir) || Exists(t.TempDir()) {
		t.Error("Exists")
	}
	if l.LastApplied() <= snapIndex {
		t.Errorf("LastApplied %d after restart, snapshot at %d", l.LastApplied(), snapIndex)
	}
}

// TestApplyAll checks that ApplyAll logs its commands in one entry, in
// order, answers each, mixes with concurrent Applies, and refuses more than
// an entry holds without logging anything.
func TestApplyAll(t *testing.T) {
	fsm := &listFSM{}
	l := open(t, t.TempDir(), fsm)
	defer l.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if _, _, err := l.Apply(context.Background(), fmt.Appendf(nil, "single-%d-%d", g, i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for round := range 10 {
		cmds := make([][]byte, 50)
		for i := range cmds {
			cmds[i] = fmt.Appendf(nil, "all-%d-%d", round, i)
		}
		res, idx, err := l.ApplyAll(context.Background(), cmds)
		if err != nil || len(res) != len(cmds) || idx == 0 {
			t.Fatalf("ApplyAll = %d results, index %d, %v", len(res), idx, err)
		}
		for i := 1; i < len(res); i++ {
			if res[i].(int) != res[i-1].(int)+1 {
				t.Fatalf("results %v and %v of one ApplyAll not consecutive: not one entry in order", res[i-1], res[i])
			}
		}
	}
	wg.Wait()
	if n := len(fsm.list()); n != 540 {
		t.Fatalf("applied %d commands, want 540", n)
	}
	if _, _, err := l.ApplyAll(context.Background(), nil); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Errorf("ApplyAll(nil): %v, want KindInvalid", err)
	}
	for _, cmds := range [][][]byte{make([][]byte, MaxEntryCommands+1), {make([]byte, MaxEntryBytes+1)}} {
		_, _, err := l.ApplyAll(context.Background(), cmds)
		if k := chunkfs.KindOf(err); k != chunkfs.KindTooLarge {
			t.Errorf("ApplyAll of %d commands: %v (kind %v), want KindTooLarge", len(cmds), err, k)
		}
	}
	if n := len(fsm.list()); n != 540 {
		t.Fatalf("refused ApplyAll applied something: %d commands", n)
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Error("empty config accepted")
	}
	if err := DefaultConfig("/x").Validate(); err != nil {
		t.Error(err)
	}
	bad := DefaultConfig("/x")
	bad.MaxBatch = 2000
	if bad.Validate() == nil {
		t.Error("MaxBatch 2000 accepted")
	}
}

func TestOpenFailsOnUnusableDir(t *testing.T) {
	cfg := DefaultConfig("/proc/definitely/not/here")
	cfg.Logger = slog.New(slog.DiscardHandler)
	if _, err := Open(context.Background(), cfg, &listFSM{}); err == nil {
		t.Error("Open on a missing directory succeeded")
	}
	_ = fs.ErrNotExist
}

// BenchmarkApply measures durable (fsynced) applies with 64 concurrent
// callers sharing fsyncs.
func BenchmarkApply(b *testing.B) {
	l := open(b, b.TempDir(), &listFSM{})
	defer l.Close()
	cmd := []byte("create /some/file/name")
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := l.Apply(context.Background(), cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	b.ReportMetric(float64(b.N)/float64(l.LastApplied()), "cmds/entry")
}

// BenchmarkApplySerial measures one caller's durable apply latency.
func BenchmarkApplySerial(b *testing.B) {
	l := open(b, b.TempDir(), &listFSM{})
	defer l.Close()
	for b.Loop() {
		if _, _, err := l.Apply(context.Background(), []byte("x")); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]request{{cmds: [][]byte{[]byte("a")}, size: 1}, {cmds: [][]byte{[]byte("bc"), []byte("d")}, size: 3}}))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := decodeBatch(b)
		if err != nil {
			return
		}
		var reqs []request
		for _, c := range cmds {
			reqs = append(reqs, request{cmds: [][]byte{c}, size: len(c)})
		}
		again, err := decodeBatch(encodeBatch(reqs))
		if err != nil || len(again) != len(cmds) {
			t.Fatalf("re-encoded batch: %d commands, %v", len(again), err)
		}
	})
}

// TestEntryChecksum: an entry with a byte flipped anywhere is refused;
// a format 1 entry (no checksum, from before) still reads.
func TestEntryChecksum(t *testing.T) {
	b := encodeBatch([]request{{cmds: [][]byte{[]byte("create /a"), []byte("mkdir /b")}, size: 17}})
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := decodeBatch(c); err == nil {
			t.Fatalf("byte %d flipped: read", i)
		}
	}
	old := append([]byte{batchFormat1}, b[1:len(b)-4]...)
	if cmds, err := decodeBatch(old); err != nil || len(cmds) != 2 || string(cmds[1]) != "mkdir /b" {
		t.Fatalf("format 1: %q, %v", cmds, err)
	}
}

// TestUnreadableEntryStopsTheMaster: a committed entry that cannot be
// read stops the apply rather than being skipped.
func TestUnreadableEntryStopsTheMaster(t *testing.T) {
	a := &fsmAdapter{}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "entry 7 cannot be read") {
			t.Fatalf("recovered %v, want the apply stopped", r)
		}
	}()
	a.applyEntry(&raft.Log{Index: 7, Type: raft.LogCommand, Data: []byte{9, 9}})
}
