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
