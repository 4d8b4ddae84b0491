package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/rpc"
)

// tlsFlags are the flags that say how a process secures its connections:
// a TLS directory (--tls-dir, or $CHUNKFS_TLS_DIR) or three files
// (--cert, --key, --ca) from the cluster's CA, or --insecure (or
// $CHUNKFS_INSECURE=1) for plain TCP. Every command that serves or
// connects has them, and needs one or the other.
type tlsFlags struct {
	dir, cert, key, ca, crl string
	insecure                bool
}

// errNoTLS is the one line a command given neither TLS nor --insecure
// fails with.
const errNoTLS = "give --tls-dir DIR (or --cert, --key and --ca, or $CHUNKFS_TLS_DIR) for mutual TLS, or --insecure for plain TCP"

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	tf := &tlsFlags{}
	fs.StringVar(&tf.dir, "tls-dir", "", "`DIR` holding this process's certificate: ca.crt, tls.crt and tls.key, as 'chunkfs cert issue' writes them (default $CHUNKFS_TLS_DIR)")
	fs.StringVar(&tf.cert, "cert", "", "this process's certificate, PEM (with --key and --ca, instead of --tls-dir)")
	fs.StringVar(&tf.key, "key", "", "the certificate's private key, PEM")
	fs.StringVar(&tf.ca, "ca", "", "the cluster CA's certificate, PEM")
	fs.StringVar(&tf.crl, "crl", "", "the cluster CA's revocation list, PEM, with --cert (a --tls-dir's is its ca.crl, when there is one); reloaded when it changes")
	fs.BoolVar(&tf.insecure, "insecure", false, "plain TCP: no TLS, no certificates (also $CHUNKFS_INSECURE=1)")
	return tf
}

// security loads what the flags name; getenv supplies $CHUNKFS_TLS_DIR and
// $CHUNKFS_INSECURE when no flag is given.
func (tf *tlsFlags) security(getenv func(string) string) (*rpc.Security, error) {
	files := tf.cert != "" || tf.key != "" || tf.ca != ""
	switch {
	case tf.insecure && (tf.dir != "" || files):
		return nil, usagef("--insecure goes with neither --tls-dir nor --cert, --key and --ca")
	case tf.dir != "" && files:
		return nil, usagef("give --tls-dir or --cert, --key and --ca, not both")
	case files && (tf.cert == "" || tf.key == "" || tf.ca == ""):
		return nil, usagef("--cert, --key and --ca go together")
	case tf.crl != "" && !files:
		return nil, usagef("--crl goes with --cert, --key and --ca (a --tls-dir's revocation list is its ca.crl)")
	case tf.insecure:
		return rpc.Insecure(), nil
	case tf.dir != "":
		return rpc.LoadSecurity(tf.dir)
	case files:
		sec, err := rpc.LoadSecurityFiles(tf.cert, tf.key, tf.ca)
		if err == nil && tf.crl != "" {
			err = sec.WatchCRL(tf.crl, nil)
		}
		return sec, err
	}
	if dir := getenv("CHUNKFS_TLS_DIR"); dir != "" {
		return rpc.LoadSecurity(dir)
	}
	if getenv("CHUNKFS_INSECURE") == "1" {
		return rpc.Insecure(), nil
	}
	return nil, usagef("%s", errNoTLS)
}

// reloadCRLOnHangup reloads sec's revocation list on every SIGHUP until
// ctx ends, logging the outcome to log (and, from then on, sec's reload
// failures). A server reloads the list by itself when its file changes;
// SIGHUP forces it. On plain TCP there is no list: SIGHUP is logged and
// ignored, as on TLS, rather than ending the process.
func reloadCRLOnHangup(ctx context.Context, sec *rpc.Security, log *slog.Logger) {
	if !sec.IsInsecure() {
		sec.SetCRLLogger(log)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if sec.IsInsecure() {
				log.Warn("SIGHUP: plain TCP, no revocation list to reload; ignored")
				continue
			}
			switch changed, err := sec.ReloadCRL(); {
			case err != nil:
				log.Error("SIGHUP: revocation list not reloaded; the list in force stays", "err", err)
			case changed:
				log.Info("SIGHUP: revocation list loaded", "crl_number", sec.CRL().Number, "revoked", sec.CRL().Len())
			case sec.CRL() == nil:
				log.Info("SIGHUP: no revocation list")
			default:
				log.Info("SIGHUP: revocation list unchanged", "crl_number", sec.CRL().Number)
			}
		}
	}()
}
