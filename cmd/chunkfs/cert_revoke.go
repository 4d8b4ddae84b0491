package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs/internal/certs"
)

// Revocation files of a CA directory: the CRL every process takes, and a
// copy of every certificate cert issue made, by serial number, so that
// cert revoke finds a name's certificates.
const (
	caCRLFile = "ca.crl"
	issuedDir = "issued"
)

// runCertRevoke is `chunkfs cert revoke`: it adds certificates, named by
// --name (every one issued to that name, of --role if given), --serial
// or --cert, to the CA directory's CRL, with a CRL number one higher.
func runCertRevoke(e *env, args []string) error {
	fs := flagSet(e)
	dir := fs.String("dir", "", "the CA's directory (from cert init)")
	name := fs.String("name", "", "revoke every certificate issued to this name")
	role := fs.String("role", "", "with --name: only certificates of this role")
	serialHex := fs.String("serial", "", "revoke the certificate with this serial number (hexadecimal, as cert revoke and the servers' logs print it)")
	certFile := fs.String("cert", "", "revoke this certificate (a tls.crt the CA issued)")
	days := fs.Int("days", 365, "when the new CRL is due for replacement, in days (it stays in force after)")
	if _, err := parse(e, fs, args); err != nil {
		return err
	}
	if *dir == "" || *days <= 0 || (*name == "" && *serialHex == "" && *certFile == "") {
		return usagef("need --dir and one of --name, --serial or --cert; --days must be positive")
	}
	if *role != "" && *name == "" {
		return usagef("--role goes with --name")
	}
	ca, err := loadCA(*dir)
	if err != nil {
		return err
	}
	targets, err := revokeTargets(ca, *dir, *name, certs.Role(*role), *serialHex, *certFile)
	if err != nil {
		return err
	}
	list, err := loadCRL(*dir, ca)
	if err != nil {
		return err
	}
	var entries []x509.RevocationListEntry
	if list != nil {
		entries = list.Entries
	}
	now := time.Now()
	var added []revokeTarget
	for _, tg := range targets {
		if list.Revoked(&x509.Certificate{SerialNumber: tg.serial}) {
			fmt.Fprintf(e.stdout, "serial %s (%s) was revoked already\n", tg.serial.Text(16), tg.who)
			continue
		}
		entries = append(entries, x509.RevocationListEntry{SerialNumber: tg.serial, RevocationTime: now})
		added = append(added, tg)
	}
	if len(added) == 0 {
		return nil
	}
	number := big.NewInt(1)
	if list != nil {
		number.Add(list.Number, number)
	}
	data, err := ca.RevocationList(entries, number, now, time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(*dir, caCRLFile), data); err != nil {
		return err
	}
	for _, tg := range added {
		fmt.Fprintf(e.stdout, "revoked serial %s (%s)\n", tg.serial.Text(16), tg.who)
	}
	fmt.Fprintf(e.stdout, "CRL number %v in %s: copy it to %s in every process's TLS directory (processes reload it when it changes, or on SIGHUP)\n",
		number, filepath.Join(*dir, caCRLFile), caCRLFile)
	return nil
}

// revokeTarget is one certificate to revoke.
type revokeTarget struct {
	serial *big.Int
	who    string // role and name, or "serial given"
}

// revokeTargets finds the certificates cert revoke's flags name.
func revokeTargets(ca *certs.CA, dir, name string, role certs.Role, serialHex, certFile string) ([]revokeTarget, error) {
	var out []revokeTarget
	if serialHex != "" {
		n, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimPrefix(serialHex, "0x"), ":", ""), 16)
		if !ok || n.Sign() <= 0 {
			return nil, usagef("--serial %q is not a hexadecimal serial number", serialHex)
		}
		out = append(out, revokeTarget{serial: n, who: describeSerial(dir, n)})
	}
	if certFile != "" {
		c, err := readCert(certFile)
		if err != nil {
			return nil, err
		}
		if err := c.CheckSignatureFrom(ca.Cert); err != nil {
			return nil, fmt.Errorf("%s was not issued by the CA in %s", certFile, dir)
		}
		out = append(out, revokeTarget{serial: c.SerialNumber, who: describeCert(c)})
	}
	if name != "" {
		found, err := issuedTo(dir, ca, name, role)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// issuedTo lists the certificates the CA in dir issued to name (of role,
// unless it is empty), from its record of issued certificates.
func issuedTo(dir string, ca *certs.CA, name string, role certs.Role) ([]revokeTarget, error) {
	paths, err := filepath.Glob(filepath.Join(dir, issuedDir, "*.crt"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []revokeTarget
	for _, p := range paths {
		c, err := readCert(p)
		if err != nil {
			return nil, err
		}
		id, err := certs.FromCertificate(c)
		if err != nil || c.CheckSignatureFrom(ca.Cert) != nil || id.Name != name || (role != "" && id.Role != role) {
			continue
		}
		out = append(out, revokeTarget{serial: c.SerialNumber, who: describeCert(c)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no certificate issued to %q is recorded in %s (give --serial or --cert)", name, filepath.Join(dir, issuedDir))
	}
	return out, nil
}

// describeSerial describes the certificate of serial n from the CA
// directory's record of issued certificates.
func describeSerial(dir string, n *big.Int) string {
	c, err := readCert(filepath.Join(dir, issuedDir, n.Text(16)+".crt"))
	if err != nil {
		return "not in " + filepath.Join(dir, issuedDir)
	}
	return describeCert(c)
}

// describeCert is a certificate's role and name, for messages.
func describeCert(c *x509.Certificate) string {
	if id, err := certs.FromCertificate(c); err == nil {
		return string(id.Role) + " " + id.Name
	}
	return c.Subject.CommonName
}

// readCert reads one PEM certificate.
func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// loadCRL reads the CA directory's CRL; nil when there is none yet.
func loadCRL(dir string, ca *certs.CA) (*certs.RevocationList, error) {
	data, err := os.ReadFile(filepath.Join(dir, caCRLFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := certs.ParseRevocationList(data, ca.Cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, caCRLFile), strings.TrimPrefix(err.Error(), "certs: "))
	}
	return l, nil
}

// replaceFile replaces path with data (0644) in one rename, so that a
// process reloading it reads the old file or the new one, never half.
func replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
