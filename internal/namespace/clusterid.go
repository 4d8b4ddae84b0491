package namespace

import (
	"fmt"

	"github.com/chunkfs/chunkfs"
)

// The cluster ID names the cluster a namespace belongs to, as HDFS's
// clusterID: the master logs a random one once (OpClusterID), and a
// chunkserver keeps the ID of the master it first registered with and
// refuses a master with another, so a chunkserver pointed at another
// cluster's master, or at a master whose directory was wiped, deletes
// nothing of its own.

// MaxClusterIDLen bounds a cluster ID.
const MaxClusterIDLen = 64

// checkClusterID refuses an empty, long or non-printable ID.
func checkClusterID(id string) error {
	if id == "" || len(id) > MaxClusterIDLen {
		return fmt.Errorf("cluster ID of %d bytes", len(id))
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("cluster ID %q is not printable ASCII", id)
		}
	}
	return nil
}

// setClusterID applies OpClusterID: the ID is set once; setting the same
// one again changes nothing, another is refused.
func (ns *Namespace) setClusterID(c *Command) Result {
	const op = "cluster id"
	switch err := checkClusterID(c.Target); {
	case err != nil:
		return fail(op, "", chunkfs.KindInvalid, err.Error())
	case ns.clusterID != "" && ns.clusterID != c.Target:
		return fail(op, "", chunkfs.KindExist, "the namespace has a cluster ID already")
	}
	ns.clusterID = c.Target
	return Result{}
}

// ClusterID returns the cluster's ID, "" before one is logged.
func (ns *Namespace) ClusterID() string { return ns.clusterID }
