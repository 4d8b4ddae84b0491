package namespace

import (
	"slices"

	"github.com/chunkfs/chunkfs"
)

// MaxServerIDLen bounds a chunkserver ID in a decommission command.
const MaxServerIDLen = 256

// MaxDraining bounds the chunkservers being decommissioned at once.
const MaxDraining = 10000

// decommission records (OpDecommission) or drops (OpRecommission) the
// operator's intent to drain chunkserver c.Path. It is the only state the
// log keeps about chunkservers: which replicas they hold is learnt from
// their reports, but the intent must survive a restart or a failover of
// the master, or a drain half done would silently stop. Either is
// idempotent.
func (ns *Namespace) decommission(c *Command) Result {
	op, id := c.Op.String(), c.Path
	if id == "" || len(id) > MaxServerIDLen {
		return fail(op, id, chunkfs.KindInvalid, "chunkserver ID empty or too long")
	}
	i, found := slices.BinarySearch(ns.draining, id)
	switch {
	case c.Op == OpRecommission && found:
		ns.draining = slices.Delete(ns.draining, i, i+1)
	case c.Op == OpDecommission && !found:
		if len(ns.draining) >= MaxDraining {
			return fail(op, id, chunkfs.KindNoSpace, "too many chunkservers being decommissioned")
		}
		ns.draining = slices.Insert(ns.draining, i, id)
	}
	return Result{}
}

// Draining returns the IDs of the chunkservers being decommissioned, in
// order.
func (ns *Namespace) Draining() []string { return slices.Clone(ns.draining) }
