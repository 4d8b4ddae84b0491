package cluster

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// startTLS starts a TLS cluster of cfg's shape and a superuser client.
func startTLS(t *testing.T, mutate func(*Config)) (*Cluster, *client.Client, context.Context) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.ChunkSize = healChunk
	cfg.TLS = true
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl, ctx
}

// TestTLSClusterPutGetAndHeal writes and reads files of several chunks
// through a TLS cluster (client to master and chunkservers, forwarding
// along replica chains), then kills a chunkserver and waits for its
// replicas to be cloned back (clone pulls between chunkservers).
func TestTLSClusterPutGetAndHeal(t *testing.T) {
	c, cl, ctx := startTLS(t, func(cfg *Config) {
		cfg.Chunkservers = 4
		cfg.Master = func(mc *master.Config) { mc.Placement.MinFree = 0 }
	})
	data := healBytes(1, 3*healChunk+1000)
	put(t, ctx, cl, "/f", data)
	got, err := get(ctx, cl, "/f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back over TLS: %d bytes, %v", len(got), err)
	}
	if err := c.StopChunkserver(0); err != nil {
		t.Fatal(err)
	}
	waitHealed(t, ctx, cl)
	if got, err := get(ctx, cl, "/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after healing: %d bytes, %v", len(got), err)
	}
}

// TestTLSGroupPutGet runs Raft between three masters over TLS.
func TestTLSGroupPutGet(t *testing.T) {
	c, cl, ctx := startTLS(t, func(cfg *Config) { cfg.Masters = 3 })
	data := healBytes(2, healChunk+10)
	put(t, ctx, cl, "/g", data)
	if got, err := get(ctx, cl, "/g"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StopGroupMaster(leader); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, cl, "/after", data) // a new leader, elected over TLS
	if got, err := get(ctx, cl, "/after"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after failover: %d bytes, %v", len(got), err)
	}
}

// TestTLSClusterRefusesUntrusted checks that a client without a trusted
// certificate reaches neither the master nor a chunkserver.
func TestTLSClusterRefusesUntrusted(t *testing.T) {
	c, cl, ctx := startTLS(t, nil)
	put(t, ctx, cl, "/secret", []byte("secret"))
	other, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	expired, err := expiredClient(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sec  *rpc.Security
		want string
	}{
		{"plain TCP", nil, "server requires TLS"},
		{"another CA", other.client, "certificate not trusted"},
		{"expired", expired, "certificate not trusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := client.DefaultConfig()
			cfg.Master, cfg.Caller, cfg.Security = c.MasterAddr(), chunkfs.Root, tc.sec
			cfg.RetryTimeout = 2 * time.Second
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if bad, err := client.New(cctx, cfg); err == nil {
				_, err = bad.Stat(cctx, "/secret")
				bad.Close()
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("master: %v; want %q", err, tc.want)
				}
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("master: %v; want %q", err, tc.want)
			}
			cc, err := tc.sec.Dial(c.ChunkserverAddr(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			_, err = pb.NewChunkServerClient(cc).ChunkInfo(cctx, &pb.ChunkInfoRequest{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("chunkserver control: %v; want %q", err, tc.want)
			}
			dc := tc.sec.NewDataClient()
			defer dc.Close()
			p := make([]byte, 6)
			n, err := dc.Read(cctx, c.ChunkserverAddr(0), 1, 1, 0, p)
			if n != 0 || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("data stream read: %d bytes, %v; want %q", n, err, tc.want)
			}
		})
	}
}

// expiredClient issues the cluster's CA a client certificate that expired
// an hour ago.
func expiredClient(c *Cluster) (*rpc.Security, error) {
	dir := c.TLSDir("expired")
	id := certs.Identity{Role: certs.RoleClient, Name: "expired", UID: 0, GIDs: []uint32{0}}
	if err := c.pki.ca.IssueDir(dir, id, loopbackHosts, time.Now().Add(-2*time.Hour), time.Hour); err != nil {
		return nil, err
	}
	return rpc.LoadSecurity(dir)
}
