package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"reflect"
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
