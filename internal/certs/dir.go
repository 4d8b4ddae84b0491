package certs

import (
	"os"
	"path/filepath"
	"time"
)

// IssueDir issues a certificate for id as Issue does and writes it, with
// its key and ca's certificate, to dir (created 0700) as a TLS directory:
// ca.crt, tls.crt and tls.key (0600), the files a process's --tls-dir
// holds. Existing files are replaced.
func (ca *CA) IssueDir(dir string, id Identity, hosts []string, now time.Time, validity time.Duration) error {
	certPEM, keyPEM, err := ca.Issue(id, hosts, now, validity)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		perm os.FileMode
	}{{"ca.crt", EncodeCert(ca.Cert.Raw), 0o644}, {"tls.crt", certPEM, 0o644}, {"tls.key", keyPEM, 0o600}}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.perm); err != nil {
			return err
		}
	}
	return nil
}
