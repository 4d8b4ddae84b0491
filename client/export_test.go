package client

import (
	"context"
	"slices"
)

// ReplicaOrder returns addrs in the order c reads chunk h's replicas, so a
// test can corrupt the replica a read will try first.
func ReplicaOrder(c *Client, h uint64, addrs []string) []string {
	out := slices.Clone(addrs)
	c.near.order(out, h)
	return out
}

// WriteAfter writes p at off of path as a flush queued behind another one
// that finishes when gate is closed, with result gateErr.
func WriteAfter(ctx context.Context, c *Client, path string, p []byte, off int64, gate <-chan struct{}, gateErr error) error {
	prev := &flight{done: make(chan struct{})}
	go func() {
		<-gate
		prev.err = gateErr
		close(prev.done)
	}()
	return c.writeAt(ctx, path, p, off, prev, 0)
}
