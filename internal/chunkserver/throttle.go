package chunkserver

import "time"

// tokenBucket is a byte-rate limiter as a pure value: no clock of its own,
// no goroutine, no lock. It holds up to burst bytes of credit, refilled
// at rate bytes a second; take spends credit and says how long the caller
// must wait before sending, letting credit go negative (a debt that later
// takes repay), so a request larger than burst is never refused, only
// delayed. Over any interval the bytes taken stay within
// burst + rate·interval.
type tokenBucket struct {
	rate   float64 // bytes a second; 0: unlimited
	burst  float64
	tokens float64
	last   time.Time // of the last refill; zero before the first take
}

func newTokenBucket(rate, burst int64) tokenBucket {
	return tokenBucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst)}
}

// take spends n bytes of credit at now and returns how long to wait
// before sending them (0: at once).
func (b *tokenBucket) take(now time.Time, n int64) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// setRate changes the refill rate from now on; credit already earned is
// kept. A rate of 0 or less leaves the bucket as it is: an unlimited
// bucket stays unlimited and a limited one is never made unlimited.
func (b *tokenBucket) setRate(now time.Time, rate float64) {
	if b.rate <= 0 || rate <= 0 {
		return
	}
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	b.rate = rate
}

// rateMeter estimates a byte rate over the last window as a pure value:
// no clock, no lock. It keeps the bytes of the current window and of the
// one before, and weighs the one before by how much of it still lies
// within a window of now (a sliding-window counter), so the estimate
// moves smoothly and forgets a burst after two windows.
type rateMeter struct {
	window    time.Duration
	start     time.Time // of the current window; zero before the first add
	cur, prev int64
}

// add counts n bytes at now.
func (m *rateMeter) add(now time.Time, n int64) {
	m.roll(now)
	m.cur += n
}

// rate returns the estimated bytes a second at now.
func (m *rateMeter) rate(now time.Time) float64 {
	m.roll(now)
	if m.start.IsZero() {
		return 0
	}
	left := 1 - float64(now.Sub(m.start))/float64(m.window)
	return (float64(m.prev)*min(max(left, 0), 1) + float64(m.cur)) / m.window.Seconds()
}

// roll moves the windows up to now.
func (m *rateMeter) roll(now time.Time) {
	switch {
	case m.start.IsZero():
		m.start = now
	case now.Sub(m.start) >= 2*m.window:
		m.start, m.prev, m.cur = now, 0, 0
	case now.Sub(m.start) >= m.window:
		m.start, m.prev, m.cur = m.start.Add(m.window), m.cur, 0
	}
}

// yieldingRate is the clone throttle's rate when clones yield to client
// traffic: the configured rate less the bytes a second clients push into
// this server, but never below a quarter of it, so that repair goes on
// under any load (the master's clone deadlines assume at least that).
func yieldingRate(limit, client float64) float64 {
	return max(limit-client, limit/cloneFloorDivisor)
}

// cloneFloorDivisor: a yielding clone throttle keeps at least
// 1/cloneFloorDivisor of its configured rate.
const cloneFloorDivisor = 4
