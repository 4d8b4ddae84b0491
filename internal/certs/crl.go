package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Revocation. A CA revokes a certificate by listing its serial number in
// an X.509 certificate revocation list (CRL) it signs; every process that
// holds the CRL refuses a peer whose certificate is on it. Each new CRL
// carries a CRL number one higher than the last, so that a process never
// goes back to an older list.

// crlPEMType is the PEM block type of a CRL.
const crlPEMType = "X509 CRL"

// RevocationList is a CRL that verified against its CA: the serial
// numbers it revokes, and when.
type RevocationList struct {
	Number     *big.Int  // the CRL number; each new list has a higher one
	ThisUpdate time.Time // when it was made
	NextUpdate time.Time // when its maker meant to replace it
	Entries    []x509.RevocationListEntry
	revoked    map[string]struct{} // serial numbers in hexadecimal
}

// Revoked reports whether c's serial number is on the list. The list
// speaks only for its own CA's certificates; the caller has verified c
// against that CA.
func (l *RevocationList) Revoked(c *x509.Certificate) bool {
	if l == nil {
		return false
	}
	_, ok := l.revoked[c.SerialNumber.Text(16)]
	return ok
}

// Len is the number of certificates the list revokes.
func (l *RevocationList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.Entries)
}

// RevocationList makes a CRL signed by ca revoking entries, numbered
// number, made at now and due for replacement after validity. It returns
// it as PEM.
func (ca *CA) RevocationList(entries []x509.RevocationListEntry, number *big.Int, now time.Time, validity time.Duration) ([]byte, error) {
	if number == nil || number.Sign() < 0 {
		return nil, errors.New("certs: a CRL number must be 0 or more")
	}
	tmpl := &x509.RevocationList{
		RevokedCertificateEntries: entries,
		Number:                    number,
		ThisUpdate:                now,
		NextUpdate:                now.Add(validity),
	}
	der, err := x509.CreateRevocationList(nil, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("certs: signing the CRL: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: crlPEMType, Bytes: der}), nil
}

// ParseRevocationList reads a PEM CRL and checks that ca issued and signed
// it. A list signed by any other key is refused.
func ParseRevocationList(data []byte, ca *x509.Certificate) (*RevocationList, error) {
	b, rest := pem.Decode(data)
	if b == nil || b.Type != crlPEMType {
		return nil, errors.New("certs: not a PEM CRL (want an \"X509 CRL\" block)")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("certs: trailing data after the CRL")
	}
	crl, err := x509.ParseRevocationList(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: CRL: %w", err)
	}
	if !bytes.Equal(crl.RawIssuer, ca.RawSubject) {
		return nil, fmt.Errorf("certs: the CRL's issuer %q is not the cluster CA %q", crl.Issuer, ca.Subject)
	}
	if err := crl.CheckSignatureFrom(ca); err != nil {
		return nil, fmt.Errorf("certs: the CRL is not signed by the cluster CA: %w", err)
	}
	if crl.Number == nil {
		return nil, errors.New("certs: the CRL has no CRL number")
	}
	l := &RevocationList{
		Number:     crl.Number,
		ThisUpdate: crl.ThisUpdate,
		NextUpdate: crl.NextUpdate,
		Entries:    crl.RevokedCertificateEntries,
		revoked:    make(map[string]struct{}, len(crl.RevokedCertificateEntries)),
	}
	for _, e := range l.Entries {
		l.revoked[e.SerialNumber.Text(16)] = struct{}{}
	}
	return l, nil
}
