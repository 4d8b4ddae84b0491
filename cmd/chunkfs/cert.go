package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs/internal/certs"
)

var certCommand = &command{
	name: "cert",
	args: "init|issue|revoke [flags]",
	summary: "make a cluster CA (init), issue node and user certificates from it (issue) and revoke them (revoke); " +
		"each issued certificate goes to a directory of its own (ca.crt, tls.crt, tls.key, ca.crl) to give a process as --tls-dir; " +
		"revoke writes the CA's ca.crl, which every process's TLS directory needs a copy of",
	example: "  chunkfs cert init --dir /etc/chunkfs/ca\n" +
		"  chunkfs cert issue --dir /etc/chunkfs/ca --role master --name m1 --host m1.example,10.0.0.1\n" +
		"  chunkfs cert issue --dir /etc/chunkfs/ca --role client --name alice --uid 1000 --gids 1000,27\n" +
		"  chunkfs cert revoke --dir /etc/chunkfs/ca --name alice",
	run: runCert,
}

// Files of a CA directory and of an issued certificate's directory.
const (
	caCertFile  = "ca.crt"
	caKeyFile   = "ca.key"
	tlsCertFile = "tls.crt"
	tlsKeyFile  = "tls.key"
)

func runCert(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if _, err := parse(e, flagSet(e), args); err != nil {
			return err
		}
	}
	if len(args) == 0 {
		return usagef("need init, issue or revoke")
	}
	switch args[0] {
	case "init":
		return runCertInit(e, args[1:])
	case "issue":
		return runCertIssue(e, args[1:])
	case "revoke":
		return runCertRevoke(e, args[1:])
	}
	return usagef("need init, issue or revoke")
}

func runCertInit(e *env, args []string) error {
	fs := flagSet(e)
	dir := fs.String("dir", "", "directory for the CA's certificate and key (created)")
	name := fs.String("name", "chunkfs cluster CA", "the CA's name")
	days := fs.Int("days", 3650, "how long the CA is valid, in days")
	if _, err := parse(e, fs, args); err != nil {
		return err
	}
	if *dir == "" || *days <= 0 {
		return usagef("need --dir, and --days must be positive")
	}
	ca, err := certs.NewCA(*name, time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	keyPEM, err := certs.EncodeKey(ca.Key)
	if err != nil {
		return err
	}
	crl, err := ca.RevocationList(nil, big.NewInt(0), time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	if err := writeNew(*dir, map[string][]byte{caCertFile: certs.EncodeCert(ca.Cert.Raw), caKeyFile: keyPEM, caCRLFile: crl}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "cluster CA in %s (keep %s secret; give %s to every process)\n", *dir, caKeyFile, caCertFile)
	return nil
}

func runCertIssue(e *env, args []string) error {
	fs := flagSet(e)
	dir := fs.String("dir", "", "the CA's directory (from cert init)")
	role := fs.String("role", "", "master, chunkserver, client or mount")
	name := fs.String("name", "", "host name of a node, user name of a client")
	uid := fs.Uint("uid", 0, "the UID a client's or mount's requests act as")
	gids := fs.String("gids", "", "its groups, comma-separated, primary first (default: the UID)")
	hosts := fs.String("host", "", "a node's DNS names and IP addresses, comma-separated (default: --name)")
	days := fs.Int("days", 365, "how long the certificate is valid, in days")
	out := fs.String("out", "", "directory for ca.crt, tls.crt and tls.key (default: DIR/NAME; created)")
	noProxy := fs.Bool("no-proxy", false, "a mount certificate that acts only as --uid, not for every user of its machine")
	if _, err := parse(e, fs, args); err != nil {
		return err
	}
	id, err := identityFromFlags(*role, *name, *uid, *gids)
	if *noProxy {
		id.Proxy = false
	}
	switch {
	case err != nil:
		return err
	case *dir == "" || *days <= 0:
		return usagef("need --dir, and --days must be positive")
	}
	ca, err := loadCA(*dir)
	if err != nil {
		return err
	}
	hostList := []string{id.Name}
	if *hosts != "" {
		hostList = strings.Split(*hosts, ",")
	}
	certPEM, keyPEM, err := ca.Issue(id, hostList, time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return usagef("%v", err)
	}
	if *out == "" {
		*out = filepath.Join(*dir, id.Name)
	}
	files := map[string][]byte{caCertFile: certs.EncodeCert(ca.Cert.Raw), tlsCertFile: certPEM, tlsKeyFile: keyPEM}
	if crl, err := os.ReadFile(filepath.Join(*dir, caCRLFile)); err == nil {
		files[caCRLFile] = crl
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := writeNew(*out, files); err != nil {
		return err
	}
	if err := recordIssued(*dir, certPEM); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s certificate for %s in %s (give the directory as --tls-dir)\n", id.Role, id.Name, *out)
	return nil
}

// identityFromFlags builds the identity cert issue certifies.
func identityFromFlags(role, name string, uid uint, gids string) (certs.Identity, error) {
	if uid > 1<<32-1 {
		return certs.Identity{}, usagef("--uid %d is out of range", uid)
	}
	id := certs.Identity{Role: certs.Role(role), Name: name, UID: uint32(uid), Proxy: role == string(certs.RoleMount)}
	if !id.Role.Node() {
		id.GIDs = []uint32{id.UID}
	}
	if gids != "" {
		id.GIDs = nil
		for _, g := range strings.Split(gids, ",") {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return certs.Identity{}, usagef("bad group %q in --gids", g)
			}
			id.GIDs = append(id.GIDs, uint32(n))
		}
	}
	if err := id.Validate(); err != nil {
		return certs.Identity{}, usagef("%s", strings.TrimPrefix(err.Error(), "certs: "))
	}
	return id, nil
}

// recordIssued keeps a copy of an issued certificate in the CA
// directory, named by its serial number, for cert revoke --name.
func recordIssued(dir string, certPEM []byte) error {
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, issuedDir), map[string][]byte{c.SerialNumber.Text(16) + ".crt": certPEM})
}

func loadCA(dir string) (*certs.CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	return certs.LoadCA(certPEM, keyPEM)
}

// writeNew writes files into dir (created 0700), keys 0600 and the rest
// 0644, refusing to replace any file that exists: a certificate is
// rotated by issuing into a new directory.
func writeNew(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return &fs.PathError{Op: "create", Path: filepath.Join(dir, name), Err: fs.ErrExist}
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for name, data := range files {
		perm := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".key") {
			perm = 0o600
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
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
		if err != nil {
			return err
		}
	}
	return nil
}
