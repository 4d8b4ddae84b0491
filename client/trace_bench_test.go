package client

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
)

// BenchmarkTraceHooks measures what tracing adds to one write attempt:
// the step timer, six steps, a push and the attempt's event, with no
// Trace (what every untraced Client pays) and with one whose hooks do
// nothing (what a Trace costs before its hooks' own work). The reference
// is one read of the real clock, of which the code before the Trace did
// six per attempt, traced or not.
func BenchmarkTraceHooks(b *testing.B) {
	b.Run("reference-clock-read", func(b *testing.B) {
		for b.Loop() {
			_ = clock.Real{}.Now()
		}
	})
	loc := &chunkLoc{handle: 7, primary: "a:1", replicas: []string{"a:1", "b:1", "c:1"}}
	noop := &Trace{WriteAttempt: func(WriteAttempt) {}, Push: func(Push) {}}
	for _, bc := range []struct {
		name  string
		trace *Trace
	}{{"nil", nil}, {"noop", noop}} {
		c := &Client{cfg: Config{Trace: bc.trace}, clock: clock.Real{}}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				attempt(c, loc)
			}
		})
	}
}

// attempt goes through a write attempt's tracing, as writeOnce does.
func attempt(c *Client, loc *chunkLoc) {
	st := c.newStepTimer()
	ev := WriteAttempt{Path: "/f", Index: 1, Offset: 0, Length: 1 << 20, Start: st.last}
	var lease time.Duration
	st.step(&ev.Prepare)
	st.tracePush(loc, 1<<20, st.step(&ev.Push), nil)
	st.step(&ev.Wait)
	st.step(&lease)
	st.step(&ev.Apply)
	st.finish(&ev, loc, nil)
}
