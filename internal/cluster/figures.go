package cluster

import (
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/master"
)

// Master returns the master alone, or a group's leader (nil while there
// is none): the one whose status page shows the cluster.
func (c *Cluster) Master() *master.Master {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master != nil {
		return c.master.m
	}
	for _, n := range c.group {
		if n.close != nil && n.m.Leads() {
			return n.m
		}
	}
	return nil
}

// ChunkserverFigures returns the figures of every running chunkserver.
func (c *Cluster) ChunkserverFigures() []chunkserver.Figures {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []chunkserver.Figures
	for _, n := range c.cs {
		if n.close != nil && n.cs != nil {
			out = append(out, n.cs.Figures())
		}
	}
	return out
}
