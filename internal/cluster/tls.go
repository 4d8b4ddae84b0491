package cluster

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// A cluster with Config.TLS runs mutual TLS on every connection: Start
// makes a CA under Dir/tls and issues a certificate for each role there,
// one directory each, as `chunkfs cert` would.

// pki is a TLS cluster's CA and the Security of each role.
type pki struct {
	dir    string
	ca     *certs.CA
	master *rpc.Security
	cs     *rpc.Security
	client *rpc.Security // a superuser client
	mount  *rpc.Security // a mount, which acts for the users it serves
}

// certValidity is how long the certificates of a test cluster are valid.
const certValidity = 24 * time.Hour

// loopbackHosts are the names a test cluster's nodes are reached by.
var loopbackHosts = []string{"127.0.0.1", "localhost", "::1"}

func newPKI(dir string) (*pki, error) {
	ca, err := certs.NewCA("chunkfs test cluster CA", time.Now(), certValidity)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca}
	if p.master, err = p.Issue(certs.Identity{Role: certs.RoleMaster, Name: "master"}); err != nil {
		return nil, err
	}
	if p.cs, err = p.Issue(certs.Identity{Role: certs.RoleChunkserver, Name: "chunkserver"}); err != nil {
		return nil, err
	}
	if p.client, err = p.Issue(certs.Identity{Role: certs.RoleClient, Name: "root", UID: 0, GIDs: []uint32{0}}); err != nil {
		return nil, err
	}
	if p.mount, err = p.Issue(certs.Identity{Role: certs.RoleMount, Name: "mount", UID: 0, GIDs: []uint32{0}, Proxy: true}); err != nil {
		return nil, err
	}
	return p, nil
}

// Issue issues a certificate for id into the directory TLSDir(id.Name)
// and loads it.
func (p *pki) Issue(id certs.Identity) (*rpc.Security, error) {
	dir := filepath.Join(p.dir, id.Name)
	if err := p.ca.IssueDir(dir, id, loopbackHosts, time.Now(), certValidity); err != nil {
		return nil, fmt.Errorf("cluster: issuing a certificate for %s: %w", id.Name, err)
	}
	return rpc.LoadSecurity(dir)
}

// Security returns the Security of a client of the cluster acting as the
// superuser: its certificate is a client's with UID 0 on a TLS cluster;
// nil (plain TCP) otherwise.
func (c *Cluster) Security() *rpc.Security {
	if c.pki == nil {
		return nil
	}
	return c.pki.client
}

// MountSecurity returns the Security of a mount of the cluster (a mount's
// certificate, which may act for other users) on a TLS cluster; nil
// otherwise.
func (c *Cluster) MountSecurity() *rpc.Security {
	if c.pki == nil {
		return nil
	}
	return c.pki.mount
}

// masterSecurity and chunkserverSecurity are the nodes' Security; nil on
// a plain cluster.
func (c *Cluster) masterSecurity() *rpc.Security {
	if c.pki == nil {
		return nil
	}
	return c.pki.master
}

func (c *Cluster) chunkserverSecurity() *rpc.Security {
	if c.pki == nil {
		return nil
	}
	return c.pki.cs
}

// TLSDir returns the directory of the certificate named name ("root" is
// the superuser client's, "mount" the mount's, "master" and
// "chunkserver" the nodes'), for a
// process's --tls-dir; "" on a plain cluster.
func (c *Cluster) TLSDir(name string) string {
	if c.pki == nil {
		return ""
	}
	return filepath.Join(c.pki.dir, name)
}

// IssueCertificate issues a certificate of the cluster's CA for id (a
// user, say) and returns its Security; its files are in TLSDir(id.Name).
// It fails on a plain cluster.
func (c *Cluster) IssueCertificate(id certs.Identity) (*rpc.Security, error) {
	if c.pki == nil {
		return nil, fmt.Errorf("cluster: not a TLS cluster")
	}
	return c.pki.Issue(id)
}
