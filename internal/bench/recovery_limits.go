package bench

import "time"

// CloneNetwork is what the limit of re-replication is derived from: the
// NIC rate every chunkserver is shaped to, the clone throttle each one
// applies to the clones it pulls as a target (chunkserver --clone-rate),
// the chunkservers left alive, and those of them that hold a replica of a
// chunk to be cloned (the only possible sources).
type CloneNetwork struct {
	NIC       Rate
	CloneRate float64 // bytes a second per target server; 0: unlimited
	Survivors int
	Sources   int // survivors holding a replica of a chunk short of replicas; 0: all of them
	MaxClones int // clones in flight per server as source (master --max-clones); 0: unbounded
}

// Limit is the highest aggregate clone rate, in MB/s, the survivors can
// reach: every cloned byte enters one survivor, which pulls at most its
// NIC and its clone throttle, and leaves one of the sources, which sends
// at most SourceRate:
//
//	min(Survivors × min(NIC, CloneRate), Sources × SourceRate).
//
// Client traffic is not subtracted: the limit is what the repair path may
// take, and the clients' share shows in their own rates.
func (n CloneNetwork) Limit() float64 {
	per := n.NIC.MBps()
	if n.CloneRate > 0 {
		per = min(per, n.CloneRate/1e6)
	}
	in := float64(max(n.Survivors, 0)) * per
	if n.Sources <= 0 {
		return in
	}
	return min(in, float64(n.Sources)*n.SourceRate())
}

// SourceRate is the most, in MB/s, one survivor can send as the source of
// clones: its NIC, and MaxClones targets each pulling at most CloneRate.
func (n CloneNetwork) SourceRate() float64 {
	r := n.NIC.MBps()
	if n.CloneRate > 0 && n.MaxClones > 0 {
		r = min(r, float64(n.MaxClones)*n.CloneRate/1e6)
	}
	return r
}

// HealTime is the least time in which chunks whose only copies hold
// bySource bytes on each source can be cloned once: the whole at Limit,
// and each source's share at SourceRate (a chunk with one replica has one
// possible source, so chunks crowded on one survivor wait for its NIC).
func (n CloneNetwork) HealTime(bySource map[string]int64) time.Duration {
	var total, most int64
	for _, b := range bySource {
		total, most = total+b, max(most, b)
	}
	t := n.TransferTime(total)
	if r := n.SourceRate(); r > 0 {
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
