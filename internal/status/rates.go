// Package status computes what chunkfs's status pages and `chunkfs admin
// report` show: the GFS paper's Table 2 (the cluster's servers, space,
// files, chunks and metadata) and Table 3 (read rate, write rate and master
// operations over the last minute, the last hour and since restart). It is
// pure: time comes in as a value, figures come in as arguments, and the
// same functions serve the web page and the terminal.
package status

import "time"

// Totals are the counters Table 3 is made of, each the total since the
// process started.
type Totals struct {
	ReadBytes    int64 // chunk data read from chunkservers
	WrittenBytes int64 // chunk data pushed to chunkservers (every replica)
	Ops          int64 // operations the master answered
}

// Step is the time between two kept samples of a Rates; the last hour is
// HourSamples of them.
const (
	Step        = 10 * time.Second
	HourSamples = int(time.Hour / Step)
)

// Rates keeps samples of Totals: one every Step for the last hour, the
// first one ever (the restart), and the newest. It is not safe for
// concurrent use; its owner records samples and asks for rates.
type Rates struct {
	first  sample
	latest sample
	ring   []sample // the last hour, oldest first, at least Step apart
	has    bool
}

type sample struct {
	at time.Time
	t  Totals
}

// Record adds the totals seen at now. Samples closer than Step to the last
// kept one replace only the newest figures; a clock that went back is
// ignored.
func (r *Rates) Record(now time.Time, t Totals) {
	s := sample{now, t}
	if !r.has {
		r.first, r.latest, r.ring, r.has = s, s, []sample{s}, true
		return
	}
	if now.Before(r.latest.at) {
		return
	}
	r.latest = s
	if now.Sub(r.ring[len(r.ring)-1].at) < Step {
		return
	}
	r.ring = append(r.ring, s)
	if len(r.ring) > HourSamples+1 {
		r.ring = append(r.ring[:0], r.ring[len(r.ring)-HourSamples-1:]...)
	}
}

// Rate is a per-second rate of the three Totals over a period.
type Rate struct {
	ReadBytes    float64       `json:"read_bytes_per_second"`
	WrittenBytes float64       `json:"written_bytes_per_second"`
	Ops          float64       `json:"ops_per_second"`
	Over         time.Duration `json:"over_ns"` // the period actually covered
}

// Over returns the rates over the last d, or over as much of it as the
// samples cover.
func (r *Rates) Over(d time.Duration) Rate {
	if !r.has {
		return Rate{}
	}
	from := r.ring[0]
	for _, s := range r.ring {
		if r.latest.at.Sub(s.at) <= d {
			from = s
			break
		}
	}
	return between(from, r.latest)
}

// SinceStart returns the rates since the first sample.
func (r *Rates) SinceStart() Rate {
	if !r.has {
		return Rate{}
	}
	return between(r.first, r.latest)
}

func between(a, b sample) Rate {
	dt := b.at.Sub(a.at)
	if dt <= 0 {
		return Rate{}
	}
	sec := dt.Seconds()
	return Rate{
		ReadBytes:    float64(b.t.ReadBytes-a.t.ReadBytes) / sec,
		WrittenBytes: float64(b.t.WrittenBytes-a.t.WrittenBytes) / sec,
		Ops:          float64(b.t.Ops-a.t.Ops) / sec,
		Over:         dt,
	}
}

// Point is the rate between two consecutive samples, at the later one's
// time: what the page plots.
type Point struct {
	At   time.Time
	Rate Rate
}

// History returns the rates between consecutive samples of the last hour,
// oldest first.
func (r *Rates) History() []Point {
	var out []Point
	for i := 1; i < len(r.ring); i++ {
		out = append(out, Point{At: r.ring[i].at, Rate: between(r.ring[i-1], r.ring[i])})
	}
	return out
}
