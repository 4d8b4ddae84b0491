package main

import (
	"flag"

	"github.com/chunkfs/chunkfs/internal/rpc"
)

// tlsFlags are the flags that say how a process secures its connections:
// a TLS directory (--tls-dir, or $CHUNKFS_TLS_DIR) or three files
// (--cert, --key, --ca) from the cluster's CA, or --insecure (or
// $CHUNKFS_INSECURE=1) for plain TCP. Every command that serves or
// connects has them, and needs one or the other.
type tlsFlags struct {
	dir, cert, key, ca string
	insecure           bool
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
	case tf.insecure:
		return rpc.Insecure(), nil
	case tf.dir != "":
		return rpc.LoadSecurity(tf.dir)
	case files:
		return rpc.LoadSecurityFiles(tf.cert, tf.key, tf.ca)
	}
	if dir := getenv("CHUNKFS_TLS_DIR"); dir != "" {
		return rpc.LoadSecurity(dir)
	}
	if getenv("CHUNKFS_INSECURE") == "1" {
		return rpc.Insecure(), nil
	}
	return nil, usagef("%s", errNoTLS)
}
