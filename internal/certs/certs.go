// Package certs makes and reads chunkfs's certificates: a cluster CA, and
// node and user certificates that carry a chunkfs identity — the role a
// process plays and, for users, the UID and groups its requests act as.
//
// The identity travels in the certificate as one URI subject alternative
// name, chunkfs://ROLE/NAME?uid=N&gids=A,B[&proxy=1], so that a server
// reads it from the verified peer certificate and never from a request.
// Keys are ECDSA P-256. The package does no I/O besides reading randomness;
// callers store the PEM it returns.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Role is what a certificate lets its holder be.
type Role string

// The roles. Masters and chunkservers are nodes: they serve and dial each
// other. Clients act as the user their certificate names; a mount may also
// act for the local users whose requests it forwards (a proxy).
const (
	RoleMaster      Role = "master"
	RoleChunkserver Role = "chunkserver"
	RoleClient      Role = "client"
	RoleMount       Role = "mount"
)

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool {
	switch r {
	case RoleMaster, RoleChunkserver, RoleClient, RoleMount:
		return true
	}
	return false
}

// Node reports whether r is a server role.
func (r Role) Node() bool { return r == RoleMaster || r == RoleChunkserver }

// Identity is who a certificate's holder is.
type Identity struct {
	Role  Role
	Name  string   // host name of a node, user name of a client
	UID   uint32   // the user requests act as (clients and mounts)
	GIDs  []uint32 // their groups, primary first
	Proxy bool     // may act for other users (mounts only)
}

// Bounds on what an identity may hold.
const (
	maxName   = 253
	maxGroups = 64
	scheme    = "chunkfs"
)

// Validate reports what is wrong with id, if anything.
func (id Identity) Validate() error {
	switch {
	case !id.Role.Valid():
		return fmt.Errorf("certs: unknown role %q", id.Role)
	case id.Name == "" || len(id.Name) > maxName || strings.ContainsAny(id.Name, "/?#%\x00"):
		return fmt.Errorf("certs: name %q must be 1 to %d bytes without / ? # %%", id.Name, maxName)
	case len(id.GIDs) > maxGroups:
		return fmt.Errorf("certs: more than %d groups", maxGroups)
	case id.Proxy && id.Role != RoleMount:
		return errors.New("certs: only a mount may act for other users")
	case !id.Role.Node() && len(id.GIDs) == 0:
		return errors.New("certs: a user certificate needs a group")
	}
	return nil
}

// URI encodes id as the certificate's identity URI.
func (id Identity) URI() *url.URL {
	q := url.Values{}
	q.Set("uid", strconv.FormatUint(uint64(id.UID), 10))
	gids := make([]string, len(id.GIDs))
	for i, g := range id.GIDs {
		gids[i] = strconv.FormatUint(uint64(g), 10)
	}
	q.Set("gids", strings.Join(gids, ","))
	if id.Proxy {
		q.Set("proxy", "1")
	}
	return &url.URL{Scheme: scheme, Host: string(id.Role), Path: "/" + id.Name, RawQuery: q.Encode()}
}

// ParseIdentity decodes an identity URI written by Identity.URI.
func ParseIdentity(u *url.URL) (Identity, error) {
	if u.Scheme != scheme {
		return Identity{}, fmt.Errorf("certs: not a chunkfs identity: scheme %q", u.Scheme)
	}
	id := Identity{Role: Role(u.Host), Name: strings.TrimPrefix(u.Path, "/")}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Identity{}, fmt.Errorf("certs: identity query: %w", err)
	}
	uid, err := strconv.ParseUint(q.Get("uid"), 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("certs: identity uid: %w", err)
	}
	id.UID = uint32(uid)
	if g := q.Get("gids"); g != "" {
		parts := strings.Split(g, ",")
		if len(parts) > maxGroups {
			return Identity{}, fmt.Errorf("certs: more than %d groups", maxGroups)
		}
		for _, p := range parts {
			n, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return Identity{}, fmt.Errorf("certs: identity gid: %w", err)
			}
			id.GIDs = append(id.GIDs, uint32(n))
		}
	}
	switch q.Get("proxy") {
	case "":
	case "1":
		id.Proxy = true
	default:
		return Identity{}, errors.New("certs: identity proxy must be 1")
	}
	return id, id.Validate()
}

// FromCertificate reads the identity of a certificate: its one chunkfs URI.
func FromCertificate(c *x509.Certificate) (Identity, error) {
	var found *url.URL
	for _, u := range c.URIs {
		if u.Scheme != scheme {
			continue
		}
		if found != nil {
			return Identity{}, errors.New("certs: certificate names two chunkfs identities")
		}
		found = u
	}
	if found == nil {
		return Identity{}, errors.New("certs: certificate names no chunkfs identity")
	}
	return ParseIdentity(found)
}

// CA is a cluster's certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a self-signed CA named name, valid from now for validity.
func NewCA(name string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"chunkfs"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue makes a key and a certificate for id, signed by ca, valid from now
// for validity. A node's certificate also names hosts (DNS names or IP
// addresses) for its server side. It returns both in PEM.
func (ca *CA) Issue(id Identity, hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.Name, OrganizationalUnit: []string{string(id.Role)}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id.URI()},
	}
	if id.Role.Node() {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return EncodeCert(der), keyPEM, nil
}

// EncodeCert returns a certificate's DER bytes as PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey returns a private key as PKCS #8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadCA reads a CA written as PEM by EncodeCert and EncodeKey.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("certs: CA certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, errors.New("certs: CA key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("certs: not a CA certificate and key")
	}
	return &CA{Cert: cert, Key: signer}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
