package bench

import (
	"context"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTestbedShapesTCP builds a real two-host testbed and checks that one TCP
// stream across it gets through at close to, and never above, the NIC rate,
// and that Close leaves no namespace behind.
func TestTestbedShapesTCP(t *testing.T) {
	needTestbed(t)
	argv := testWorkerArgv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := DefaultTestbedConfig()
	cfg.Prefix, cfg.Chunkservers, cfg.Clients = "cfsbt-", 1, 1
	unlock, err := Lock(ctx, LockPath(cfg.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	log := slog.New(slog.DiscardHandler)
	if err := Cleanup(ctx, cfg.Prefix, log); err != nil {
		t.Fatal(err)
	}
	tb, err := NewTestbed(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Build(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
		out, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(out), cfg.Prefix) {
			t.Errorf("namespaces left after Close:\n%s", out)
		}
	}()
	bc := Config{WorkerArgv: argv}
	mbps := sendAcross(ctx, t, bc, tb, 2_000_000)
	nic := cfg.NIC.MBps()
	t.Logf("one TCP stream: %.3f MB/s over a %.3f MB/s NIC", mbps, nic)
	if mbps > 1.05*nic || mbps < 0.5*nic {
		t.Errorf("one TCP stream got %.3f MB/s through a %.3f MB/s NIC", mbps, nic)
	}
}

// sendAcross sends bytes from the first client host to the first
// chunkserver host and returns the rate in MB/s.
func sendAcross(ctx context.Context, t *testing.T, cfg Config, tb *Testbed, bytes int64) float64 {
	t.Helper()
	dir := t.TempDir()
	addr := net.JoinHostPort(tb.Chunkservers[0].Addr.String(), "7100")
	sink, err := startWorker(cfg, tb.Chunkservers[0], Task{Op: OpSink, Addr: addr}, dir, "sink")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.kill()
	if _, err := sink.next(); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	res, err := runWorkers(ctx, cfg, tb.Clients[:1], []Task{{Op: OpSource, Addr: addr, Bytes: bytes}}, dir, "source")
	if err != nil {
		t.Fatal(err)
	}
	sink.in.Close()
	m, err := sink.next()
	if err != nil || m.Result == nil || m.Result.Bytes != bytes {
		t.Fatalf("sink received %+v (err %v), want %d bytes", m.Result, err, bytes)
	}
	return float64(res[0].Bytes) / res[0].Seconds() / 1e6
}
