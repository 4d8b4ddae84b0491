package client

import (
	"context"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Master = "127.0.0.1:1"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a master: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Master = "" },
		func(c *Config) { c.WriteBuffer = -1 },
		func(c *Config) { c.WriteBehind = -1 },
		func(c *Config) { c.WriteBehind = 1<<30 + 1 },
		func(c *Config) { c.LocationTTL = 0 },
		func(c *Config) { c.LookupBatch = 0 },
		func(c *Config) { c.RetryTimeout = 0 },
		func(c *Config) { c.Caller.GIDs = nil },
		func(c *Config) { c.Umask = 0o1000 },
	}
	for i, mutate := range bad {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}

// TestMaxFlights: WriteBehind / WriteBuffer flushes may be in flight, at
// least two and at most 64.
func TestMaxFlights(t *testing.T) {
	for _, tt := range []struct{ buffer, behind, want int }{
		{8 << 20, 16 << 20, 2}, // the defaults
		{1 << 20, 16 << 20, 16},
		{1 << 20, 0, 2},
		{4 << 20, 6 << 20, 2},
		{48 << 10, 1 << 30, 64},
		{0, 16 << 20, 2}, // write-through
	} {
		c := &Client{cfg: Config{WriteBuffer: tt.buffer, WriteBehind: tt.behind}}
		if got := c.maxFlights(); got != tt.want {
			t.Errorf("WriteBuffer %d, WriteBehind %d: %d flushes in flight, want %d", tt.buffer, tt.behind, got, tt.want)
		}
	}
}

func TestNearnessOrder(t *testing.T) {
	n := &nearness{local: []net.IP{net.ParseIP("10.1.2.3")}, seed: 42}
	addrs := []string{"192.168.9.9:1", "10.1.2.77:1", "10.1.2.3:1", "bad-address"}
	n.order(addrs, 7)
	if addrs[0] != "10.1.2.3:1" || addrs[1] != "10.1.2.77:1" {
		t.Fatalf("order = %v; want this host, then its subnet first", addrs)
	}
	// Ties are broken per chunk, so different chunks spread over replicas.
	firsts := map[string]bool{}
	for h := range uint64(64) {
		a := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
		n.order(a, h)
		firsts[a[0]] = true
	}
	if len(firsts) < 2 {
		t.Fatalf("every chunk reads from the same replica: %v", firsts)
	}
}

func TestLeaseCache(t *testing.T) {
	lc := newLeaseCache()
	now := time.Unix(1000, 0)
	loc := &chunkLoc{primary: "p"}
	lc.put("/f", 3, loc, 64, now.Add(time.Second))
	if got, _, ok := lc.get("/f", 3, now); !ok || got != loc {
		t.Fatal("fresh lease not found")
	}
	if _, _, ok := lc.get("/f", 3, now.Add(time.Second)); ok {
		t.Fatal("expired lease still used")
	}
	lc.put("/f", 4, loc, 64, now.Add(time.Hour))
	lc.dropPath("/f")
	if _, _, ok := lc.get("/f", 4, now); ok {
		t.Fatal("lease kept after dropPath")
	}
}

func TestLocationStoreSkipsPastEnd(t *testing.T) {
	c := &Client{chunkSize: 100, near: &nearness{}}
	c.clock = clock.NewFake(time.Unix(0, 0))
	lc := newLocationCache(c, time.Minute, 8)
	c.locs = lc
	lc.store("/f", 0, &chunkfs.FileInfo{Length: 250}, []*chunkLoc{{index: 0, handle: 9, replicas: []string{"a:1"}}})
	if loc, length, ok := lc.cached("/f", 0); !ok || loc == nil || loc.handle != 9 || length != 250 {
		t.Fatalf("chunk 0 = %v, %d, %v", loc, length, ok)
	}
	if loc, _, ok := lc.cached("/f", 1); !ok || loc != nil {
		t.Fatalf("chunk 1 should be a cached hole, got %v, %v", loc, ok)
	}
	if _, _, ok := lc.cached("/f", 3); ok {
		t.Fatal("a chunk past the end was cached")
	}
	lc.dropPrefix("/")
	if _, _, ok := lc.cached("/f", 0); ok {
		t.Fatal("dropPrefix(/) kept an entry")
	}
}

// FuzzCheckPath: checkPath never panics, and what it accepts is absolute,
// clean and within the limits.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "a", "/../x", "//a//", "/a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := checkPath("op", p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(got, "/") || path.Clean(got) != got || strings.Contains(got, "\x00") {
			t.Fatalf("checkPath(%q) = %q", p, got)
		}
		if slices.ContainsFunc(strings.Split(got, "/"), func(s string) bool { return len(s) > 255 }) {
			t.Fatalf("checkPath(%q) accepted a long name", p)
		}
	})
}

// TestRetrierCountsFromFirstFailure: RetryTimeout runs from the first
// failure, not from the operation's start, so an attempt that spent long
// moving data before it failed is still retried.
func TestRetrierCountsFromFirstFailure(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	c := &Client{cfg: Config{RetryTimeout: time.Minute}, clock: clk}
	r := c.newRetrier()
	clk.Advance(5 * time.Minute) // the first attempt's long push
	failed := chunkfs.E("write", "/f", chunkfs.KindNotPrimary, "no valid lease")
	again := func() bool {
		out := make(chan bool)
		go func() { out <- r.again(context.Background(), failed) }()
		for {
			select {
			case ok := <-out:
				return ok
			default:
			}
			if clk.Waiters() > 0 {
				clk.Advance(time.Second) // the back-off
			}
			runtime.Gosched()
		}
	}
	if !again() {
		t.Fatal("not retried after a first attempt longer than RetryTimeout")
	}
	clk.Advance(time.Minute)
	if again() {
		t.Fatal("retried after RetryTimeout of failures")
	}
	if r2 := c.newRetrier(); r2.again(context.Background(), chunkfs.E("write", "/f", chunkfs.KindInvalid, "bad")) {
		t.Fatal("retried an error that is not retryable")
	}
}

// endingMaster answers PrepareWrite with a lease that ends in 1 ms, then,
// after the client has waited it out, with a new one.
type endingMaster struct {
	masterAPI
	clk   *clock.Fake
	mu    sync.Mutex
	calls []time.Time
}

func (m *endingMaster) PrepareWrite(context.Context, *pb.PrepareWriteRequest) (*pb.PrepareWriteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, m.clk.Now())
	v, left := uint64(5), int64(1)
	if len(m.calls) > 1 {
		v, left = 6, 60000
	}
	return &pb.PrepareWriteResponse{ChunkSize: 1 << 20, Chunk: &pb.ChunkLocation{
		Handle: 9, Version: v, Primary: "p:1", Replicas: []string{"p:1", "s:1"}, LeaseExpiryMs: left,
	}}, nil
}

// TestPrepareWaitsOutEndingLease: a lease the master says is about to end
// is not used; the client waits until the master can grant a new one and
// asks again.
func TestPrepareWaitsOutEndingLease(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	m := &endingMaster{clk: clk}
	var waits []LeaseWait // written before the wait, read after it
	tr := &Trace{LeaseWait: func(w LeaseWait) { waits = append(waits, w) }}
	c := &Client{cfg: Config{Trace: tr}, clock: clk, masterConn: masterConn{master: m}, leases: newLeaseCache(), near: &nearness{}, log: slog.New(slog.DiscardHandler)}
	type result struct {
		loc *chunkLoc
		err error
	}
	out := make(chan result, 1)
	go func() {
		loc, _, err := c.prepareCached(context.Background(), "/f", 0, false)
		out <- result{loc, err}
	}()
	var r result
	for done := false; !done; {
		select {
		case r = <-out:
			done = true
		default:
			if clk.Waiters() > 0 {
				clk.Advance(100 * time.Millisecond)
			}
			runtime.Gosched()
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.loc.version != 6 {
		t.Fatalf("used lease version %d, want the new lease's 6", r.loc.version)
	}
	if len(m.calls) != 2 || m.calls[1].Sub(m.calls[0]) < leaseMargin {
		t.Fatalf("asked the master at %v, want twice, %v apart at least", m.calls, leaseMargin)
	}
	if loc, _, ok := c.leases.get("/f", 0, clk.Now()); !ok || loc.version != 6 {
		t.Fatal("the new lease is not cached")
	}
	if len(waits) != 1 || waits[0].Path != "/f" || waits[0].Left >= leaseEnding || waits[0].Wait != waits[0].Left+leaseMargin {
		t.Fatalf("lease waits traced: %+v, want one of the ending lease", waits)
	}
}

func TestReportSpaceCountsEachDiskOnce(t *testing.T) {
	shared := Disk{ID: "host:1", Capacity: 1000, Free: 400}
	r := &Report{Servers: []ServerStatus{
		{ID: "a", Alive: true, Used: 10, Disks: []Disk{shared}},
		{ID: "b", Alive: true, Used: 20, Disks: []Disk{shared, {ID: "host:2", Capacity: 500, Free: 100}}},
		{ID: "c", Alive: false, Used: 99, Disks: []Disk{{ID: "host:3", Capacity: 7, Free: 7}}},
		{ID: "old", Alive: true, Used: 5, Capacity: 50, Free: 25}, // reports no disks
	}}
	capacity, used, free := r.Space()
	if capacity != 1550 || used != 35 || free != 525 {
		t.Fatalf("Space() = %d, %d, %d; want 1550, 35, 525", capacity, used, free)
	}
}

// TestOpenKnownRefusesMoreThanAccess: OpenKnown takes an access mode and
// the file's attributes only; a create, a truncation or no attributes is
// a clear error, never a file.
func TestOpenKnownRefusesMoreThanAccess(t *testing.T) {
	c := &Client{}
	fi := &chunkfs.FileInfo{FileName: "f", FileMode: 0o644}
	for _, tc := range []struct {
		flag int
		fi   *chunkfs.FileInfo
	}{{os.O_RDWR | os.O_CREATE, fi}, {os.O_WRONLY | os.O_TRUNC, fi}, {os.O_RDONLY, nil}} {
		if f, err := c.OpenKnown(context.Background(), "/f", tc.flag, tc.fi); f != nil || chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("OpenKnown(%#x, %v) = %v, %v; want an invalid-argument error", tc.flag, tc.fi, f, err)
		}
	}
	dir := &chunkfs.FileInfo{FileName: "d", FileMode: fs.ModeDir | 0o755}
	if _, err := c.OpenKnown(context.Background(), "/d", os.O_RDWR, dir); chunkfs.KindOf(err) != chunkfs.KindIsDir {
		t.Errorf("OpenKnown of a directory for writing: %v", err)
	}
	if f, err := c.OpenKnown(context.Background(), "/f", os.O_RDWR, fi); err != nil || f.Name() != "/f" {
		t.Errorf("OpenKnown: %v, %v", f, err)
	}
}

// TestLocationsValidatedAtOpen: cached locations of a file that has since
// been replaced (another inode) or written (another mtime, or only another
// ctime: a kernel's coarse mtime can repeat across a truncation and a
// rewrite, and a reader then read the old chunk, still on its servers)
// are dropped by the open that learns so; those of the file as cached are
// kept.
func TestLocationsValidatedAtOpen(t *testing.T) {
	c := &Client{chunkSize: 100, near: &nearness{}}
	c.clock = clock.NewFake(time.Unix(0, 0))
	lc := newLocationCache(c, time.Minute, 8)
	c.locs = lc
	stored := func() {
		lc.store("/f", 0, &chunkfs.FileInfo{Inode: 7, Length: 50, MTime: time.Unix(0, 1000), CTime: time.Unix(0, 1000)}, []*chunkLoc{{index: 0, handle: 9, replicas: []string{"a:1"}}})
	}
	for _, tc := range []struct {
		fi   chunkfs.FileInfo
		kept bool
	}{
		{chunkfs.FileInfo{Inode: 7, Length: 50, MTime: time.Unix(0, 1000), CTime: time.Unix(0, 1000)}, true},
		{chunkfs.FileInfo{Inode: 7, Length: 50, MTime: time.Unix(0, 2000), CTime: time.Unix(0, 2000)}, false}, // rewritten at the same length
		{chunkfs.FileInfo{Inode: 7, Length: 50, MTime: time.Unix(0, 1000), CTime: time.Unix(0, 3000)}, false}, // rewritten within the kernel's mtime tick
		{chunkfs.FileInfo{Inode: 8, Length: 50, MTime: time.Unix(0, 1000), CTime: time.Unix(0, 1000)}, false}, // replaced by another file
	} {
		stored()
		lc.validate("/f", &tc.fi)
		if _, _, ok := lc.cached("/f", 0); ok != tc.kept {
			t.Errorf("open of %+v: cached location kept %v, want %v", tc.fi, ok, tc.kept)
		}
	}
}
