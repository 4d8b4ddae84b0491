package client

import "slices"

// ReplicaOrder returns addrs in the order c reads chunk h's replicas, so a
// test can corrupt the replica a read will try first.
func ReplicaOrder(c *Client, h uint64, addrs []string) []string {
	out := slices.Clone(addrs)
	c.near.order(out, h)
	return out
}
