// Package clock lets time-dependent code take its clock as a value: Real in
// production, Fake in tests, which advance it by hand instead of sleeping.
//
// A Clock tells the time and makes one-shot timers (After) and tickers.
// The shells (master, chunkserver, client) take one in their Config; the
// pure packages take no clock at all, only now as a value. A Fake's time
// moves only when Advance moves it, and every timer and ticker due by
// then fires, in order, so a test steps through leases, heartbeats and
// deadlines without sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers and tickers.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTicker returns a ticker that fires every d.
	NewTicker(d time.Duration) Ticker
}

// Ticker is the part of *time.Ticker that chunkfs uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker wraps time.NewTicker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Fake is a clock that moves only when Advance is called. Timers and
// tickers fire, in time order, as Advance passes their deadlines. Channels
// are buffered by one; a tick that finds the buffer full is dropped, as
// with time.Ticker.
type Fake struct {
	mu      sync.Mutex // guards now and waiters
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	at     time.Time
	period time.Duration // 0 for one-shot
	ch     chan time.Time
	done   bool
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once the clock has advanced by d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	return f.add(d, 0).ch
}

// NewTicker returns a ticker driven by Advance.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	return fakeTicker{f, f.add(d, d)}
}

func (f *Fake) add(d, period time.Duration) *waiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), period: period, ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- f.now
		w.done = true
		return w
	}
	f.waiters = append(f.waiters, w)
	return w
}

// Advance moves the clock forward by d, firing every timer and ticker whose
// deadline it passes.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		w := f.nextLocked(end)
		if w == nil {
			break
		}
		f.now = w.at
		select {
		case w.ch <- w.at:
		default:
		}
		if w.period > 0 {
			w.at = w.at.Add(w.period)
		} else {
			w.done = true
		}
	}
	f.now = end
	f.pruneLocked()
}

// Waiters returns how many timers and tickers are pending; tests use it to
// know that a goroutine has reached its wait before advancing.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pruneLocked()
	return len(f.waiters)
}

func (f *Fake) nextLocked(end time.Time) *waiter {
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	for _, w := range f.waiters {
		if !w.done && !w.at.After(end) {
			return w
		}
	}
	return nil
}

func (f *Fake) pruneLocked() {
	live := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.done {
			live = append(live, w)
		}
	}
	f.waiters = live
}

type fakeTicker struct {
	f *Fake
	w *waiter
}

func (t fakeTicker) C() <-chan time.Time { return t.w.ch }
func (t fakeTicker) Stop() {
	t.f.mu.Lock()
	t.w.done = true
	t.f.mu.Unlock()
}
