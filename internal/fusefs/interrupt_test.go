package fusefs

import (
	"context"
	"testing"
	"time"
)

// TestMutationIgnoresInterrupts: the kernel's interrupt of a request
// (go-fuse cancels its context) ends a read or look-up, but not a change
// that may already be on its way to the cluster; OpTimeout bounds both.
func TestMutationIgnoresInterrupts(t *testing.T) {
	m := &mount{cfg: Config{OpTimeout: time.Hour}}
	type key struct{}
	req, interrupt := context.WithCancel(context.WithValue(context.Background(), key{}, "caller"))
	read, cancelRead := m.call(req)
	defer cancelRead()
	change, cancelChange := m.mutation(req)
	defer cancelChange()
	interrupt()
	if read.Err() == nil {
		t.Error("an interrupted read's context is still live")
	}
	if change.Err() != nil {
		t.Errorf("an interrupted change's context ended: %v", change.Err())
	}
	if _, ok := change.Deadline(); !ok {
		t.Error("a change has no deadline")
	}
	if change.Value(key{}) != "caller" {
		t.Error("a change lost the request's values (the caller)")
	}
}
