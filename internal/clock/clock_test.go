package clock

import (
	"testing"
	"time"
)

func TestFakeAfterAndTicker(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	after := f.After(2 * time.Second)
	tick := f.NewTicker(time.Second)
	f.Advance(time.Second)
	select {
	case <-after:
		t.Fatal("After fired early")
	default:
	}
	if got := <-tick.C(); !got.Equal(start.Add(time.Second)) {
		t.Errorf("tick at %v", got)
	}
	f.Advance(time.Second)
	if got := <-after; !got.Equal(start.Add(2 * time.Second)) {
		t.Errorf("after at %v", got)
	}
	tick.Stop()
	f.Advance(5 * time.Second)
	select {
	case <-tick.C():
		// one buffered tick from the second Advance is allowed
	default:
	}
	if n := f.Waiters(); n != 0 {
		t.Errorf("waiters = %d after stop, want 0", n)
	}
	if !f.Now().Equal(start.Add(7 * time.Second)) {
		t.Errorf("now = %v", f.Now())
	}
}
