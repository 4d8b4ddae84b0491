package master

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// childDirEnv, when set, makes the test binary run a master on that
// directory instead of the tests: the crash test starts it as a separate
// process so that it can SIGKILL it.
const childDirEnv = "CHUNKFS_TEST_MASTER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(runChildMaster(dir))
	}
	os.Exit(m.Run())
}

// runChildMaster opens the master, checks the namespace it recovered,
// prints "ADDR host:port" and serves until killed.
func runChildMaster(dir string) int {
	cfg := DefaultConfig()
	cfg.Dir, cfg.ChunkSize = dir, 1<<20
	cfg.SnapshotThreshold = 20000 // checkpoints happen during the test
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := m.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "CHECK FAILED:", err)
		return 2
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ADDR %s\n", lis.Addr())
	if err := m.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a master running in another process.
type child struct {
	cmd  *exec.Cmd
	addr string
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child master did not start: %q %v", line, err)
	}
	c := &child{cmd: cmd, addr: strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

// TestCrashKeepsAcknowledgedCreates creates files from 64 concurrent
// clients against a master in another process, SIGKILLs it while creates
// are in flight, restarts it on the same directory, and checks that every
// acknowledged create is there, that nothing else is but the create (or
// the batch) each client had in flight, and that the namespace is
// consistent. Half the clients create one file per call, half send Batch
// calls of batchCreates creates; a batch is one log entry, so after the
// crash it is there whole or not at all.
func TestCrashKeepsAcknowledgedCreates(t *testing.T) {
	const clients = 64
	total := 100_000
	switch {
	case testing.Short():
		total = 5_000
	case raceEnabled: // the race detector slows both processes several times
		total = 10_000
	}
	dir := t.TempDir()
	c := startChild(t, dir)
	cc, err := rpc.Dial(c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	for g := range clients {
		if _, err := mc.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/c%02d", g), Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	acked := make([]int, clients) // client g's files f0..f(acked-1) were acknowledged
	var count atomic.Int64
	var killOnce sync.Once
	kill := func() { killOnce.Do(func() { c.cmd.Process.Signal(syscall.SIGKILL) }) }
	var wg sync.WaitGroup
	start := time.Now()
	per := make([]int, clients) // creates per call of client g
	for g := range clients {
		per[g] = 1
		if g%2 == 1 {
			per[g] = batchCreates
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i += per[g] {
				if !createFiles(mc, g, i, per[g]) {
					return // the master is gone
				}
				acked[g] = i + per[g]
				if count.Add(int64(per[g])) >= int64(total) {
					kill()
				}
			}
		}()
	}
	wg.Wait()
	c.cmd.Wait()
	elapsed := time.Since(start)
	t.Logf("%d creates acknowledged in %v before SIGKILL (%.0f/s)", count.Load(), elapsed.Round(time.Millisecond), float64(count.Load())/elapsed.Seconds())
	if count.Load() < int64(total) {
		t.Fatalf("only %d creates acknowledged", count.Load())
	}

	c2 := startChild(t, dir) // exits with "CHECK FAILED" if the namespace is inconsistent
	cc2, err := rpc.Dial(c2.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	verifyCreates(t, pb.NewMasterClient(cc2), acked, per)
}

const batchCreates = 8

// createFiles creates client g's files f(first)…f(first+n-1): one Create
// call when n is 1, else one Batch call. It reports whether all succeeded.
func createFiles(mc pb.MasterClient, g, first, n int) bool {
	if n == 1 {
		_, err := mc.Create(bg, &pb.CreateRequest{Caller: root, Path: fmt.Sprintf("/c%02d/f%06d", g, first), Mode: 0o644, Exclusive: true})
		return err == nil
	}
	req := &pb.BatchRequest{}
	for i := first; i < first+n; i++ {
		req.Ops = append(req.Ops, &pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: root, Path: fmt.Sprintf("/c%02d/f%06d", g, i), Mode: 0o644, Exclusive: true}}})
	}
	resp, err := mc.Batch(bg, req)
	if err != nil || len(resp.Results) != n {
		return false
	}
	for _, r := range resp.Results {
		if r.GetCreate() == nil {
			return false
		}
	}
	return true
}

// verifyCreates lists each client's directory: it must hold exactly the
// acknowledged files, plus at most the call that was in flight (of per[g]
// creates, there whole or not at all).
func verifyCreates(t *testing.T, mc pb.MasterClient, acked, per []int) {
	for g, n := range acked {
		var names []string
		after := ""
		for {
			ls, err := mc.List(bg, &pb.ListRequest{Caller: root, Path: fmt.Sprintf("/c%02d", g), After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ls.Entries {
				names = append(names, e.Name)
			}
			if !ls.More {
				break
			}
			after = ls.Entries[len(ls.Entries)-1].Name
		}
		if len(names) != n && len(names) != n+per[g] {
			t.Fatalf("client %d: %d files after restart, %d acknowledged, %d per call", g, len(names), n, per[g])
		}
		for i, name := range names {
			if want := fmt.Sprintf("f%06d", i); name != want {
				t.Fatalf("client %d: file %d is %s, want %s", g, i, name, want)
			}
		}
	}
}
