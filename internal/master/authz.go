package master

import (
	"context"
	"fmt"
	"slices"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Who may act as whom (docs/architecture.md, "Who may act as whom").
// A call's identity is its connection's verified certificate, never a
// request field: a client certificate acts as exactly the user it names; a
// mount certificate with the proxy privilege acts as the user each request
// claims (it forwards the requests of its machine's users); nodes call only
// the node calls. On a plain connection (--insecure) the claimed caller is
// trusted, as before there were certificates.

// policy is what the master's configuration says about callers.
type policy struct {
	requireIdentity bool   // a call without a certificate identity is refused
	superGroup      uint32 // its members, and UID 0, are the superuser
}

func (c Config) policy() policy {
	return policy{requireIdentity: !c.Security.IsInsecure(), superGroup: c.SuperuserGroup}
}

// access says who may make one call.
type access struct {
	nodes []certs.Role // node roles that may make it
	users bool         // client and mount certificates may make it
	admin bool         // a user making it must be the superuser
}

var (
	forUsers    = access{users: true}
	forAdmins   = access{users: true, admin: true}
	forServers  = access{nodes: []certs.Role{certs.RoleChunkserver}}
	forAnyone   = access{users: true, nodes: []certs.Role{certs.RoleChunkserver, certs.RoleMaster}}
	forHA       = access{users: true, nodes: []certs.Role{certs.RoleMaster}}
	forHAAdmins = access{users: true, admin: true, nodes: []certs.Role{certs.RoleMaster}}
	// forPage: a master's status page reads the cluster with the master's
	// own certificate, acting (as every node) as nobody, so its file
	// browser shows only what anyone may see.
	forPage = access{users: true, nodes: []certs.Role{certs.RoleMaster}}
)

// methods lists every Master call and who may make it; a call not listed
// is refused to every certificate. ClusterReport (counts and servers, no
// names), Fsck (which skips what its caller may not read, as hdfs fsck)
// and SafeMode's get are open to every user; the calls that change the
// cluster need the superuser.
var methods = map[string]access{
	"Mkdir": forUsers, "Create": forUsers, "Stat": forPage, "List": forPage,
	"Rename": forUsers, "Link": forUsers, "MakeSnapshot": forUsers, "Delete": forUsers, "SetAttr": forUsers, "GetChunks": forPage,
	"PrepareWrite": forUsers, "CommitLength": forUsers, "Batch": forUsers, "Msync": forPage,
	"ClusterReport": forPage, "Fsck": forUsers,
	"GetXattr": forUsers, "ListXattr": forUsers, "SetXattr": forUsers, "RemoveXattr": forUsers,
	"LockSession": forUsers, "Lock": forUsers,
	"ClusterInfo": forAnyone, "ReportCorrupt": forAnyone, // clients and chunkservers both find bad replicas
	"Register": forServers, "Heartbeat": forServers,
	"HAStatus": forHA, "HAChange": forHAAdmins, // a new observer asks the leader to add it
	"Balance": forAdmins, "Decommission": forAdmins,
	"TrashList": forUsers, "Undelete": forUsers, "PurgeTrash": forUsers, // the namespace shows each caller its own
	"SafeMode": forUsers, // any user reads it; enter and leave check for the superuser
}

// authorize decides whom a call of method (its last name, "Create") acts
// as, given the verified identity of its peer (nil on a plain connection)
// and the caller its request claims (nil when it names none). A refusal is
// a permission error.
func authorize(p policy, id *certs.Identity, method string, claimed *chunkfs.Caller) (chunkfs.Caller, error) {
	a, known := methods[method]
	if id == nil {
		if p.requireIdentity {
			return chunkfs.Caller{}, deny(method, "no client certificate")
		}
		c := p.mark(trusted(claimed))
		if err := p.admitted(method, a, c); err != nil {
			return chunkfs.Caller{}, err
		}
		return c, nil
	}
	switch {
	case !known:
		return chunkfs.Caller{}, deny(method, "unknown call")
	case id.Role.Node():
		if !slices.Contains(a.nodes, id.Role) {
			return chunkfs.Caller{}, deny(method, fmt.Sprintf("not a call for a %s", id.Role))
		}
		return nobody, nil // a node acts on no one's files
	case !a.users:
		return chunkfs.Caller{}, deny(method, fmt.Sprintf("not a call for a %s certificate", id.Role))
	}
	c, err := actingAs(id, claimed)
	if err != nil {
		return chunkfs.Caller{}, deny(method, err.Error())
	}
	c = p.mark(c)
	if err := p.admitted(method, a, c); err != nil {
		return chunkfs.Caller{}, err
	}
	return c, nil
}

// trusted is the caller a plain connection's request acts as: the one it
// claims, or nobody.
func trusted(claimed *chunkfs.Caller) chunkfs.Caller {
	if claimed == nil {
		return nobody
	}
	return *claimed
}

// actingAs is the caller a user certificate's request acts as. A proxy
// mount acts as whom it claims; any other acts as its certificate's user,
// and a claim of another UID or of a group it lacks is refused.
func actingAs(id *certs.Identity, claimed *chunkfs.Caller) (chunkfs.Caller, error) {
	own := chunkfs.Caller{UID: id.UID, GIDs: slices.Clone(id.GIDs)}
	switch {
	case claimed == nil:
		return own, nil
	case id.Proxy && id.Role == certs.RoleMount:
		return chunkfs.Caller{UID: claimed.UID, GIDs: slices.Clone(claimed.GIDs)}, nil
	case claimed.UID != id.UID:
		return chunkfs.Caller{}, fmt.Errorf("certificate of uid %d cannot act as uid %d", id.UID, claimed.UID)
	}
	for _, g := range claimed.GIDs {
		if !slices.Contains(id.GIDs, g) {
			return chunkfs.Caller{}, fmt.Errorf("certificate of uid %d is not in group %d", id.UID, g)
		}
	}
	return own, nil
}

// mark sets c's superuser mark from the superuser group.
func (p policy) mark(c chunkfs.Caller) chunkfs.Caller {
	c.Super = c.UID == 0 || slices.Contains(c.GIDs, p.superGroup)
	return c
}

// admitted refuses an admin call to a caller that is not the superuser.
func (p policy) admitted(method string, a access, c chunkfs.Caller) error {
	if a.admin && !c.Superuser() {
		return deny(method, "only the superuser")
	}
	return nil
}

// deny is the one-line refusal of a call: "Stat: permission denied: why".
func deny(method, why string) error {
	return chunkfs.E(method, "", chunkfs.KindPermission, chunkfs.KindPermission.String()+": "+why)
}

// peerIdentity is the verified certificate identity of ctx's peer, nil on
// a plain connection.
func peerIdentity(ctx context.Context) *certs.Identity {
	id, ok := rpc.PeerIdentity(ctx)
	if !ok {
		return nil
	}
	return &id
}
