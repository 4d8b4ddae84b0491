package bench

import "time"

// CloneNetwork is what the limit of re-replication is derived from: the
// NIC rate every chunkserver is shaped to, the clone throttles each one
// applies to the clones it pulls as a target (chunkserver --clone-rate)
// and to those it sends as a source (--clone-source-rate), the
// chunkservers left alive, and those of them that hold a replica of a
// chunk to be cloned (the only possible sources).
type CloneNetwork struct {
	NIC        Rate
	CloneRate  float64 // bytes a second per target server; 0: unlimited
	SourceRate float64 // bytes a second per source server; 0: unlimited
	Survivors  int
	Sources    int // survivors holding a replica of a chunk short of replicas; 0: all of them
	MaxClones  int // clones in flight per server as source (master --max-clones); 0: unbounded
}

// Limit is the highest aggregate clone rate, in MB/s, the survivors can
// reach: every cloned byte enters one survivor, which pulls at most its
// NIC and its clone throttle, and leaves one of the sources (all the
// survivors when Sources is 0), which sends at most SendRate:
//
//	min(Survivors × min(NIC, CloneRate), Sources × SendRate).
//
// Client traffic is not subtracted: the limit is what the repair path may
// take, and the clients' share shows in their own rates.
func (n CloneNetwork) Limit() float64 {
	per := n.NIC.MBps()
	if n.CloneRate > 0 {
		per = min(per, n.CloneRate/1e6)
	}
	survivors := float64(max(n.Survivors, 0))
	sources := survivors
	if n.Sources > 0 {
		sources = float64(n.Sources)
	}
	return min(survivors*per, sources*n.SendRate())
}

// SendRate is the most, in MB/s, one survivor can send as the source of
// clones: UrgentSendRate, and its source throttle.
func (n CloneNetwork) SendRate() float64 {
	r := n.UrgentSendRate()
	if n.SourceRate > 0 {
		r = min(r, n.SourceRate/1e6)
	}
	return r
}

// UrgentSendRate is the most, in MB/s, one survivor can send as the
// source of clones of chunks with no other live replica, which its source
// throttle does not hold back: its NIC, and MaxClones targets each pulling
// at most CloneRate.
func (n CloneNetwork) UrgentSendRate() float64 {
	r := n.NIC.MBps()
	if n.CloneRate > 0 && n.MaxClones > 0 {
		r = min(r, float64(n.MaxClones)*n.CloneRate/1e6)
	}
	return r
}

// HealTime is the least time in which chunks whose only copies hold
// bySource bytes on each source can be cloned once: the whole at Limit,
// and each source's share at UrgentSendRate (a chunk with one replica has
// one possible source, so chunks crowded on one survivor wait for its
// NIC).
func (n CloneNetwork) HealTime(bySource map[string]int64) time.Duration {
	var total, most int64
	for _, b := range bySource {
		total, most = total+b, max(most, b)
	}
	t := n.TransferTime(total)
	if r := n.UrgentSendRate(); r > 0 {
		t = max(t, time.Duration(float64(most)/(r*1e6)*float64(time.Second)))
	}
	return t
}

// TransferTime is how long cloning bytes takes at Limit.
func (n CloneNetwork) TransferTime(bytes int64) time.Duration {
	l := n.Limit()
	if l <= 0 {
		return 0
	}
	return time.Duration(float64(bytes) / (l * 1e6) * float64(time.Second))
}
