package master

import (
	"math"
	"testing"
	"time"
)

func TestQueueHistStats(t *testing.T) {
	var h queueHist
	if st := h.stats(); st.Calls != 0 || st.MeanMS != 0 {
		t.Fatalf("empty histogram: %+v", st)
	}
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	st := h.stats()
	if st.Calls != 100 || math.Abs(st.MeanMS-50.5) > 1e-9 {
		t.Fatalf("calls %d mean %g, want 100 and 50.5", st.Calls, st.MeanMS)
	}
	// Each percentile is its bucket's upper bound: within 2^(1/8) above.
	for _, c := range []struct{ got, want float64 }{{st.P50MS, 50}, {st.P90MS, 90}, {st.P99MS, 99}} {
		if c.got < c.want || c.got > c.want*math.Exp2(1.0/queueSub) {
			t.Errorf("percentile %g, want %g to %g", c.got, c.want, c.want*math.Exp2(1.0/queueSub))
		}
	}
}
