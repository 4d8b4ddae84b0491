package client

import (
	"sync"
	"time"
)

// A replica that does not answer a read (a hung server: its TCP connection
// stays up, nothing comes back) must not hold a reader up until the master
// declares the server dead. Each request to a replica that is not the last
// to try therefore has a deadline of its own, from the expected transfer
// time: replicaFloor plus the length at replicaRate, a rate any live
// replica beats (for a 512 KiB piece 1.25 s, for a 1 MiB region 1.5 s).
// The last replica to try has none (the caller's context only): with
// nowhere else to go, a slow answer is better than none. A replica that
// misses its deadline is a suspect for suspectFor: later reads try it last
// and give it no parallel worker, so a hung replica delays a reader once,
// by one deadline, not on every read.
const (
	replicaFloor = time.Second
	replicaRate  = 2 << 20 // bytes a second
	suspectFor   = 30 * time.Second
)

// replicaTimeout is the deadline of a request for n bytes to one replica,
// with floor the least (replicaFloor, but for unit tests of other things).
func replicaTimeout(floor time.Duration, n int) time.Duration {
	return floor + time.Duration(float64(n)/replicaRate*float64(time.Second))
}

// A network slower than replicaRate assumes (a replica's NIC shared by
// clones, a writer's chain and other readers while a failure is repaired)
// made every replica miss its deadline: readers dropped pieces part-read,
// read them again elsewhere and left replica after replica out of their
// parallel reads for suspectFor, down to a third of their rate. The
// deadline therefore also allows for the rate this client's replica reads
// achieve (readPace): a replica slowFactor times slower than that misses
// it, and none is given less than minReplicaRate (a FUSE-sized read's
// deadline stays within 2 s).
const (
	slowFactor     = 4
	minReplicaRate = 128 << 10 // bytes a second
	paceWeight     = 0.125     // of a new measurement in readPace's average
)

// readPace is the rate this client's replica reads achieve: an average
// of the recent ones, each weighted paceWeight, as TCP smooths its RTT. Its
// methods take the measurements; it has no clock.
type readPace struct {
	mu   sync.Mutex // guards rate
	rate float64    // bytes a second; 0: nothing measured yet
}

// observe adds a read of n bytes that took d.
func (p *readPace) observe(n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	r := float64(n) / d.Seconds()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate == 0 {
		p.rate = r
		return
	}
	p.rate += paceWeight * (r - p.rate)
}

// timeout is replicaTimeout at the slower of replicaRate and a
// slowFactor-th of the rate observed, but at least minReplicaRate.
func (p *readPace) timeout(floor time.Duration, n int) time.Duration {
	p.mu.Lock()
	rate := p.rate
	p.mu.Unlock()
	r := float64(replicaRate)
	if rate > 0 {
		r = max(min(r, rate/slowFactor), minReplicaRate)
	}
	return floor + time.Duration(float64(n)/r*float64(time.Second))
}

// suspects are the replicas that recently missed a read's deadline, with
// when each stops being one. Its methods take the time; it has no clock.
type suspects struct {
	mu    sync.Mutex // guards until
	until map[string]time.Time
}

// mark makes addr a suspect from now for suspectFor.
func (s *suspects) mark(addr string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = make(map[string]time.Time)
	}
	s.until[addr] = now.Add(suspectFor)
}

// clear clears addr, which has just answered.
func (s *suspects) clear(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.until, addr)
}

// order returns addrs with the suspects at now moved to the end, each part
// in its order, and how many are not suspects; expired suspicions are
// dropped.
func (s *suspects) order(addrs []string, now time.Time) ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.until) == 0 {
		return addrs, len(addrs)
	}
	out := make([]string, 0, len(addrs))
	var late []string
	for _, a := range addrs {
		if t, ok := s.until[a]; ok && now.Before(t) {
			late = append(late, a)
			continue
		}
		delete(s.until, a)
		out = append(out, a)
	}
	return append(out, late...), len(out)
}
