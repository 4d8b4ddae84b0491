package client

import "github.com/chunkfs/chunkfs/internal/rpc"

// Security is what a Client presents to the cluster and checks it by: a
// certificate, its key and the cluster's CA for mutual TLS, or nothing
// (Insecure) for plain TCP.
type Security = rpc.Security

// Insecure returns the Security of plain TCP connections.
func Insecure() *Security { return rpc.Insecure() }

// LoadSecurity reads a TLS directory: the cluster CA's certificate
// (ca.crt) and the client's certificate and key (tls.crt, tls.key).
func LoadSecurity(dir string) (*Security, error) { return rpc.LoadSecurity(dir) }
