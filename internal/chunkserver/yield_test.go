package chunkserver

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
)

func TestRateMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := rateMeter{window: 2 * time.Second}
	if r := m.rate(t0); r != 0 {
		t.Fatalf("empty meter: %v B/s", r)
	}
	steps := []struct {
		at   time.Duration
		add  int64
		want float64
	}{
		{0, 2000, 1000},                      // 2000 B in the current 2 s window
		{time.Second, 2000, 2000},            // 4000 B in it
		{3 * time.Second, 0, 1000},           // the window rolled: half of the 4000 before still counts
		{4 * time.Second, 0, 0},              // a whole window with nothing
		{10 * time.Second, 600, 300},         // long silence forgets everything
		{10*time.Second - time.Hour, 0, 300}, // time going back changes nothing
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		m.add(now, s.add)
		if got := m.rate(now); got != s.want {
			t.Errorf("step %d at %v: rate %v B/s, want %v", i, s.at, got, s.want)
		}
	}
}

func TestYieldingRate(t *testing.T) {
	for _, c := range []struct{ limit, client, want float64 }{
		{1000, 0, 1000},  // no clients: the whole throttle
		{1000, 400, 600}, // byte for byte
		{1000, 750, 250}, // down to a quarter
		{1000, 5000, 250},
	} {
		if got := yieldingRate(c.limit, c.client); got != c.want {
			t.Errorf("yieldingRate(%v, %v) = %v, want %v", c.limit, c.client, got, c.want)
		}
	}
}

// TestCloneLimiterYields: client bytes pushed into the server slow its
// clones to a quarter of the throttle; once the clients stop, the clones
// get the whole throttle back within two windows. Without yield the
// clients change nothing.
func TestCloneLimiterYields(t *testing.T) {
	const rate = 1 << 20
	for _, yield := range []bool{true, false} {
		c := clock.NewFake(time.Unix(1e9, 0))
		l := newCloneLimiter(c, 2, rate, yield)
		l.delay(c.Now(), 2*clonePiece) // the burst: a piece a stream
		c.Advance(time.Second)
		l.clientBytes(3 * rate) // 1.5 × the throttle, in the current window
		want := time.Second     // a second's worth of credit at the full rate
		if yield {
			want = 4 * time.Second // at a quarter
		}
		l.delay(c.Now(), rate) // repays the second just refilled
		if d := l.delay(c.Now(), rate); d != want {
			t.Errorf("yield %v: 1 MiB under client traffic waits %v, want %v", yield, d, want)
		}
		c.Advance(20 * time.Second) // clients gone, the debt repaid and the burst refilled at a quarter or more
		l.delay(c.Now(), 2*clonePiece)
		if d := l.delay(c.Now(), rate); d != time.Second {
			t.Errorf("yield %v: 1 MiB after the clients stopped waits %v, want 1s", yield, d)
		}
	}
}

// TestCloneYieldsToClientPushes: a clone into a server that clients push
// to takes longer than the throttle alone allows, and is still whole.
func TestCloneYieldsToClientPushes(t *testing.T) {
	const rate = 1 << 20
	dirs := []string{t.TempDir(), t.TempDir()}
	tc := newTunedCluster(t, dirs, func(c *Config) { c.CloneRate, c.CloneStreams, c.CloneYield = rate, 1, true })
	data := randBytes(rand.New(rand.NewPCG(9, 10)), 6<<20)
	tc.writeOn(0, 3, 1, data)
	tc.writeOn(1, 5, 1, make([]byte, 4<<20)) // client pushes into the target: 2 MiB/s over its 2 s window
	start := tc.clock.Now()
	err := tc.driveClock(func() error {
		_, err := tc.clone(1, 3, 1, 0, int64(len(data)))
		return err
	}, func() {})
	if err != nil {
		t.Fatalf("clone while yielding: %v", err)
	}
	// Unyielding: 5 s (TestCloneThrottle). Yielding, the first pieces
	// go at a quarter of the rate until the pushes leave the window.
	if took := tc.clock.Now().Sub(start); took < 6*time.Second {
		t.Fatalf("6 MiB cloned in %v of fake time next to 4 MiB of client pushes; want over 6 s", took)
	}
	if got := tc.replica(1, 3, 1); !bytes.Equal(got, data) {
		t.Fatal("clone differs")
	}
}

// TestCloneLimiterBurstPerStream: two streams slowed by their sources pay
// for their pieces at once without waiting (the bucket holds a piece for
// each), and the rate holds after that.
func TestCloneLimiterBurstPerStream(t *testing.T) {
	const rate = 1 << 20
	c := clock.NewFake(time.Unix(1e9, 0))
	l := newCloneLimiter(c, 2, rate, false)
	c.Advance(3 * time.Second) // both pieces took 3 s to arrive
	for i := range 2 {
		if d := l.delay(c.Now(), clonePiece); d != 0 {
			t.Errorf("piece %d of the two streams waits %v, want none", i+1, d)
		}
	}
	if d := l.delay(c.Now(), clonePiece); d != time.Second {
		t.Errorf("a third piece at once waits %v, want 1s at the rate", d)
	}
}
