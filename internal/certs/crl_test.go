package certs

import (
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestRevocationListRoundTrip(t *testing.T) {
	ca, err := NewCA("c", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	revoked := issueCert(t, ca, "mallory")
	kept := issueCert(t, ca, "alice")
	data, err := ca.RevocationList([]x509.RevocationListEntry{{SerialNumber: revoked.SerialNumber, RevocationTime: now}}, big.NewInt(3), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseRevocationList(data, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Revoked(revoked) || l.Revoked(kept) || l.Len() != 1 || l.Number.Int64() != 3 {
		t.Errorf("list: revoked %v, kept %v, len %d, number %v", l.Revoked(revoked), l.Revoked(kept), l.Len(), l.Number)
	}
	if !l.NextUpdate.Equal(now.Add(time.Hour)) {
		t.Errorf("NextUpdate = %v", l.NextUpdate)
	}
	var none *RevocationList
	if none.Revoked(revoked) || none.Len() != 0 {
		t.Error("a nil list revokes")
	}
}

func TestParseRevocationListRefusesOthers(t *testing.T) {
	ca, _ := NewCA("c", now, 24*time.Hour)
	other, _ := NewCA("c", now, 24*time.Hour) // same name, another key
	good, err := ca.RevocationList(nil, big.NewInt(1), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.RevocationList(nil, big.NewInt(1), now, time.Hour)
	otherName, _ := NewCA("someone else", now, 24*time.Hour)
	foreign, _ := otherName.RevocationList(nil, big.NewInt(1), now, time.Hour)
	b, _ := pem.Decode(good)
	flipped := append([]byte(nil), b.Bytes...)
	flipped[len(flipped)-5] ^= 1
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"another CA's key", forged, "not signed by the cluster CA"},
		{"another CA", foreign, "is not the cluster CA"},
		{"tampered", pem.EncodeToMemory(&pem.Block{Type: crlPEMType, Bytes: flipped}), "CRL"},
		{"not PEM", []byte("junk"), "not a PEM CRL"},
		{"a certificate", EncodeCert(ca.Cert.Raw), "not a PEM CRL"},
		{"trailing data", append(append([]byte(nil), good...), "junk"...), "trailing data"},
		{"empty", nil, "not a PEM CRL"},
	}
	for _, tc := range cases {
		_, err := ParseRevocationList(tc.data, ca.Cert)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ca.RevocationList(nil, big.NewInt(-1), now, time.Hour); err == nil {
		t.Error("a negative CRL number was accepted")
	}
}

func issueCert(t *testing.T, ca *CA, name string) *x509.Certificate {
	t.Helper()
	certPEM, _, err := ca.Issue(Identity{Role: RoleClient, Name: name, UID: 1, GIDs: []uint32{1}}, nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func FuzzParseRevocationList(f *testing.F) {
	ca, err := NewCA("c", now, 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := ca.RevocationList([]x509.RevocationListEntry{{SerialNumber: big.NewInt(7), RevocationTime: now}}, big.NewInt(1), now, time.Hour)
	f.Add(good)
	f.Add([]byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseRevocationList(data, ca.Cert)
		if err != nil {
			return
		}
		if l.Number == nil {
			t.Fatalf("accepted a list without a CRL number: %+v", l)
		}
		for _, e := range l.Entries {
			if _, ok := l.revoked[e.SerialNumber.Text(16)]; !ok {
				t.Fatalf("entry %v lost from the lookup", e.SerialNumber)
			}
		}
	})
}
