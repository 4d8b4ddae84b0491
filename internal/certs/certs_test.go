package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func TestIssueAndReadIdentity(t *testing.T) {
	ca, err := NewCA("test cluster", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ids := []Identity{
		{Role: RoleMaster, Name: "m1.example", GIDs: nil},
		{Role: RoleChunkserver, Name: "cs1"},
		{Role: RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{100, 27}},
		{Role: RoleMount, Name: "gw", UID: 0, GIDs: []uint32{0}, Proxy: true},
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, id := range ids {
		certPEM, keyPEM, err := ca.Issue(id, []string{"127.0.0.1", "m1.example"}, now, time.Hour)
		if err != nil {
			t.Fatalf("issue %+v: %v", id, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		usage := x509.ExtKeyUsageClientAuth
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("%s does not verify against the CA: %v", id.Name, err)
		}
		got, err := FromCertificate(cert)
		if err != nil || !reflect.DeepEqual(got, id) {
			t.Fatalf("identity of %s = %+v, %v; want %+v", id.Name, got, err, id)
		}
		if id.Role.Node() {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: "m1.example"}); err != nil {
				t.Fatalf("node certificate for m1.example: %v", err)
			}
		}
	}
}

func TestIssueRefusesBadIdentities(t *testing.T) {
	ca, err := NewCA("c", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []Identity{
		{Role: "admin", Name: "x", GIDs: []uint32{1}},
		{Role: RoleClient, Name: "", GIDs: []uint32{1}},
		{Role: RoleClient, Name: "a/b", GIDs: []uint32{1}},
		{Role: RoleClient, Name: "bob", UID: 5},
		{Role: RoleClient, Name: "bob", UID: 5, GIDs: []uint32{5}, Proxy: true},
		{Role: RoleClient, Name: "bob", UID: 5, GIDs: make([]uint32, maxGroups+1)},
	} {
		if _, _, err := ca.Issue(id, nil, now, time.Hour); err == nil {
			t.Errorf("Issue(%+v) succeeded", id)
		}
	}
}

func TestLoadCA(t *testing.T) {
	ca, err := NewCA("c", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := EncodeKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadCA(EncodeCert(ca.Cert.Raw), keyPEM)
	if err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadCA = %v", err)
	}
	if _, _, err := back.Issue(Identity{Role: RoleClient, Name: "u", GIDs: []uint32{1}}, nil, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	// A leaf certificate is not a CA.
	certPEM, leafKey, _ := ca.Issue(Identity{Role: RoleClient, Name: "u", GIDs: []uint32{1}}, nil, now, time.Hour)
	if _, err := LoadCA(certPEM, leafKey); err == nil {
		t.Fatal("LoadCA took a leaf certificate")
	}
	if _, err := LoadCA([]byte("junk"), keyPEM); err == nil {
		t.Fatal("LoadCA took junk")
	}
	if b, _ := pem.Decode(certPEM); b == nil {
		t.Fatal("issued certificate is not PEM")
	}
}

func FuzzParseIdentity(f *testing.F) {
	f.Add("chunkfs://client/alice?uid=1000&gids=100,27")
	f.Add("chunkfs://mount/gw?uid=0&gids=0&proxy=1")
	f.Add("chunkfs://master/m1?uid=0&gids=")
	f.Add("https://example.com/")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		id, err := ParseIdentity(u)
		if err != nil {
			return
		}
		if id.Validate() != nil {
			t.Fatalf("ParseIdentity(%q) returned an invalid identity %+v", s, id)
		}
		again, err := ParseIdentity(id.URI())
		if err != nil || !reflect.DeepEqual(again, id) {
			t.Fatalf("identity %+v does not round-trip: %+v, %v", id, again, err)
		}
	})
}

// FuzzFromCertificate: the identity read from a certificate (DER as it
// comes in a handshake, or a certificate's list of URIs) is a valid one,
// read from the certificate's only chunkfs URI, and round-trips; a
// certificate with none or two is refused. Nothing panics.
func FuzzFromCertificate(f *testing.F) {
	ca, err := NewCA("fuzz", now, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range []Identity{
		{Role: RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{100, 27}},
		{Role: RoleMount, Name: "gw", GIDs: []uint32{0}, Proxy: true},
		{Role: RoleChunkserver, Name: "cs1"},
	} {
		certPEM, _, err := ca.Issue(id, []string{"127.0.0.1"}, now, time.Hour)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := pem.Decode(certPEM)
		f.Add(b.Bytes, id.URI().String())
	}
	f.Add(ca.Cert.Raw, "chunkfs://client/a?uid=1&gids=1\nchunkfs://client/b?uid=2&gids=2")
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00}, "spiffe://x/y\nchunkfs://master/m1?uid=0&gids=")
	f.Add([]byte{}, "chunkfs://client/x?uid=4294967295&gids=4294967295,0&proxy=1")
	check := func(t *testing.T, c *x509.Certificate) {
		id, err := FromCertificate(c)
		n := 0
		for _, u := range c.URIs {
			if u.Scheme == scheme {
				n++
			}
		}
		if err != nil {
			return
		}
		if n != 1 {
			t.Fatalf("identity %+v read from a certificate with %d chunkfs URIs", id, n)
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("invalid identity %+v read from %v: %v", id, c.URIs, err)
		}
		if again, err := ParseIdentity(id.URI()); err != nil || !reflect.DeepEqual(again, id) {
			t.Fatalf("identity %+v does not round-trip: %+v, %v", id, again, err)
		}
	}
	f.Fuzz(func(t *testing.T, der []byte, uris string) {
		if c, err := x509.ParseCertificate(der); err == nil {
			check(t, c)
		}
		c := &x509.Certificate{}
		for _, s := range strings.Split(uris, "\n") {
			if u, err := url.Parse(s); err == nil {
				c.URIs = append(c.URIs, u)
			}
		}
		check(t, c)
	})
}
