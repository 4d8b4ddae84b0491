package bench

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs/client"
)

// TestClusterPKI: with TLS the testbed's CA and certificates come from
// `chunkfs cert`: the master's and each chunkserver's certify their
// testbed addresses, the workers' loads as a client's; without TLS every
// server runs --insecure; a binary that cannot make them is a clear error.
func TestClusterPKI(t *testing.T) {
	tb := &Testbed{Master: Host{Addr: netip.MustParseAddr("198.18.0.2")},
		Chunkservers: []Host{{Addr: netip.MustParseAddr("198.18.1.2")}, {Addr: netip.MustParseAddr("198.18.1.3")}}}
	if args, err := clusterPKI(tb, "/nonexistent", false, t.TempDir()); err != nil || !slices.Equal(args("master"), []string{"--insecure"}) {
		t.Fatalf("without TLS: %v", err)
	}
	if _, err := clusterPKI(tb, "/nonexistent/chunkfs", true, t.TempDir()); err == nil || !strings.Contains(err.Error(), "chunkfs cert init") {
		t.Fatalf("a missing binary: %v, want a chunkfs cert error", err)
	}
	if testing.Short() {
		t.Skip("builds chunkfs")
	}
	bin, dir := buildChunkfs(t), t.TempDir()
	args, err := clusterPKI(tb, bin, true, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := args("chunkserver02"); !slices.Equal(got, []string{"--tls-dir", filepath.Join(dir, "chunkserver02")}) {
		t.Errorf("chunkserver02's flags %v", got)
	}
	if _, err := client.LoadSecurity(filepath.Join(dir, "bench")); err != nil {
		t.Errorf("the workers' certificate: %v", err)
	}
	for name, addr := range map[string]netip.Addr{"master": tb.Master.Addr, "chunkserver01": tb.Chunkservers[0].Addr, "chunkserver02": tb.Chunkservers[1].Addr} {
		b, err := os.ReadFile(filepath.Join(dir, name, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: tls.crt is not PEM", name)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != addr.String() {
			t.Errorf("%s: certificate for %v (%v), want %s", name, cert.IPAddresses, err, addr)
		}
	}
}
