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
