package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

var (
	procFaults = flag.Int("pcampaign.faults", 16, "fault steps TestProcessCampaign takes, each a fault or the end of one (the long run: 1000, over 500 faults)")
	procSeed   = flag.Uint64("pcampaign.seed", 0, "TestProcessCampaign's random seed (0: from the time)")
	procErrs   = flag.Bool("pcampaign.v", false, "log the first failed operations of each kind of TestProcessCampaign")
)

// The process campaign runs the chunkfs binary as a master and five
// chunkservers on loopback and injects faults into the processes and their
// disks while a writer, an appender and a reader work and verify.
const (
	pcChunk   = 64 << 10 // chunk size
	pcServers = 5
	pcFiles   = 200 // files the writer keeps; older ones are deleted
	pcLogRecs = 200 // records per log file before the appender starts the next
	pcLogs    = 3   // log files kept; older ones are verified, then deleted
	pcDisk    = 128 << 20
)

// pcServer is one chunkserver process of the campaign and its fault.
type pcServer struct {
	p     *proc
	args  []string
	mount string // its tmpfs (full-disk faults), "" without one
	data  string // its data directory
	fault string // "" or the fault it is under: kill, stop, unwritable, full
}

// pcCluster is the campaign's processes.
type pcCluster struct {
	t          *testing.T
	masterAddr string
	masterArgs []string
	master     *proc
	cs         []*pcServer
	asUser     *syscall.Credential // the chunkservers' user when the test is root: chmod then binds them
	repaired   int64               // clones reported by masters since killed
}

func startPCCluster(t *testing.T) *pcCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "chunkfs-pcampaign")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &pcCluster{t: t, masterAddr: freeAddr(t)}
	makeBinaryReachable(t)
	if os.Getuid() == 0 {
		c.asUser = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	c.masterArgs = []string{"master", "--dir", filepath.Join(dir, "master"), "--listen", c.masterAddr,
		"--chunk-size", fmt.Sprint(pcChunk), "--lease", "3s", "--dead-after", "4s", "--reserve", fmt.Sprint(8 << 20),
		// Deleted files leave the trash soon: with the default three
		// days, the files the run removes would fill the small disks and
		// leave no room to heal into.
		"--trash-period", "5s"}
	c.master = startProc(t, "master", c.masterArgs...)
	for i := range pcServers {
		s := &pcServer{data: filepath.Join(dir, fmt.Sprintf("cs%d", i), "data")}
		c.prepareDisk(s, filepath.Join(dir, fmt.Sprintf("cs%d", i)))
		s.args = []string{"chunkserver", "--dir", s.data, "--listen", freeAddr(t), "--master", c.masterAddr,
			"--heartbeat", "200ms", "--scrub", "200ms", "--reserve", "4M", "--buffer", "64M"}
		c.cs = append(c.cs, s)
		c.startServer(i)
	}
	return c
}

// prepareDisk makes server s's data directory, on a tmpfs of its own
// when the test may mount one (root), owned by the chunkservers' user.
func (c *pcCluster) prepareDisk(s *pcServer, root string) {
	t := c.t
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.asUser != nil {
		out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", pcDisk), "tmpfs", root).CombinedOutput()
		if err == nil {
			s.mount = root
			t.Cleanup(func() { exec.Command("umount", "-l", root).Run() }) // after the processes: cleanups run last first
		} else {
			t.Logf("no tmpfs for %s (no full-disk faults on it): %v %s", root, err, out)
		}
	}
	if err := os.MkdirAll(s.data, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.asUser != nil {
		if err := os.Chown(s.data, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *pcCluster) startServer(i int) {
	s := c.cs[i]
	s.p = &proc{name: fmt.Sprintf("cs%d", i), cmd: exec.Command(binary, s.args...)}
	s.p.cmd.Stderr = &s.p.out
	if c.asUser != nil {
		s.p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.asUser}
	}
	if err := s.p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := s.p
	c.t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if c.t.Failed() {
			c.t.Logf("%s stderr (last 4 KiB):\n%s", p.name, tail(p.out.String(), 4<<10))
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// kill SIGKILLs p and reaps it.
func kill(p *proc) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// restartMaster SIGKILLs the master and starts it again on the same
// directory and address, first noting the clones it has made.
func (c *pcCluster) restartMaster(ctx context.Context, cl *client.Client) {
	c.noteRepairs(ctx, cl)
	kill(c.master)
	c.master = startProc(c.t, "master", c.masterArgs...)
}

func (c *pcCluster) noteRepairs(ctx context.Context, cl *client.Client) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if r, err := cl.ClusterReport(rctx); err == nil {
		c.repaired += r.Repaired
	}
}

// inject puts server i under fault f.
func (c *pcCluster) inject(i int, f string) error {
	s := c.cs[i]
	s.fault = f
	switch f {
	case "kill":
		kill(s.p)
	case "stop":
		return s.p.cmd.Process.Signal(syscall.SIGSTOP)
	case "unwritable":
		return os.Chmod(s.data, 0)
	case "full":
		return fillDisk(filepath.Join(s.mount, "filler"))
	}
	return nil
}

// restore ends server i's fault. A directory that was unwritable failed in
// the chunkserver (its replicas were marked corrupt): as an operator after
// replacing a disk, it restarts the server.
func (c *pcCluster) restore(i int) error {
	s := c.cs[i]
	var err error
	switch s.fault {
	case "kill":
		c.startServer(i)
	case "stop":
		err = s.p.cmd.Process.Signal(syscall.SIGCONT)
	case "unwritable":
		err = os.Chmod(s.data, 0o755)
		kill(s.p)
		c.startServer(i)
	case "full":
		err = os.Remove(filepath.Join(s.mount, "filler"))
	}
	s.fault = ""
	return err
}

// fillDisk writes p until its file system is full.
func fillDisk(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// flip flips one byte of the replica of chunk h on server i.
func (c *pcCluster) flip(i int, h chunkfs.Handle, off int64) error {
	files, _ := filepath.Glob(filepath.Join(c.cs[i].data, "*", fmt.Sprintf("%016x.data", uint64(h))))
	if len(files) != 1 {
		return fmt.Errorf("no replica of %d on cs%d", h, i)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return err
	}
	b[0] ^= 0xFF
	_, err = f.WriteAt(b[:], off)
	return err
}

func (c *pcCluster) serverAt(addr string) int {
	for i, s := range c.cs {
		if slices.Contains(s.args, addr) {
			return i
		}
	}
	return -1
}

// pcWork is the campaign's workload and what it has verified.
type pcWork struct {
	cl   *client.Client
	seed uint64

	mu       sync.Mutex        // guards the fields below
	files    map[string][]byte // acknowledged files
	order    []string          // their paths, oldest first
	logs     []string          // log files, oldest first
	recs     map[string][]int  // each log's acknowledged records (sequence numbers)
	written  int               // files acknowledged
	verified int64             // bytes read back and compared
	records  int64             // acknowledged records read back
	failures []string          // wrong bytes read: each a failure of the campaign
	errs     map[string]int    // operations that failed (allowed during faults), by kind
	kept     []string          // logs whose check failed during the run, checked again at the end
	diagnose func(log string)  // logs what each replica of a log that failed its check holds
	t        *testing.T
}

func (w *pcWork) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
}

// failed counts a failed operation of kind op.
func (w *pcWork) failed(op string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs[op]++
	w.errs[op+" "+chunkfs.KindOf(err).String()]++
	if *procErrs && w.errs[op] <= 5 {
		w.t.Logf("%s: %v", op, err)
	}
}

func pcBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// opCtx bounds one operation of the workload.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

// writeOne writes file i whole and records it once acknowledged; a file
// beyond the last pcFiles is deleted.
func (w *pcWork) writeOne(ctx context.Context, i int) {
	p := fmt.Sprintf("/f%06d", i)
	data := pcBytes(w.seed+uint64(i), 1+int((w.seed+uint64(i)*7919)%(3*pcChunk)))
	octx, cancel := opCtx(ctx)
	defer cancel()
	f, err := w.cl.Create(octx, p)
	if err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		w.failed("write", err)
		if f != nil {
			// Created but not written: removed, as an application
			// would, so that failed files do not fill the small disks
			// (and fail more writes for want of space).
			rctx, rcancel := opCtx(ctx)
			if err := w.cl.Remove(rctx, p); err != nil {
				w.failed("remove a failed write", err)
			}
			rcancel()
		}
		time.Sleep(50 * time.Millisecond) // the master may be down: do not spin
		return
	}
	w.mu.Lock()
	w.written++
	w.files[p] = data
	w.order = append(w.order, p)
	var old string
	if len(w.order) > pcFiles {
		old = w.order[0]
		w.order = w.order[1:]
		delete(w.files, old)
	}
	w.mu.Unlock()
	if old != "" {
		if err := w.cl.Remove(octx, old); err != nil {
			w.failed("remove", err)
		}
	}
}

// readOne reads an acknowledged file back and compares it.
func (w *pcWork) readOne(ctx context.Context, rng *rand.Rand) {
	w.mu.Lock()
	if len(w.order) == 0 {
		w.mu.Unlock()
		return
	}
	p := w.order[rng.IntN(len(w.order))]
	want := w.files[p]
	w.mu.Unlock()
	octx, cancel := opCtx(ctx)
	defer cancel()
	got, err := readAll(octx, w.cl, p)
	w.mu.Lock()
	_, still := w.files[p]
	w.mu.Unlock()
	switch {
	case err != nil:
		w.failed("read", err) // a fault, or deleted meanwhile
	case !bytes.Equal(got, want) && still:
		w.fail("%s: acknowledged %d bytes, read %d different ones", p, len(want), len(got))
	default:
		w.mu.Lock()
		w.verified += int64(len(got))
		w.mu.Unlock()
	}
}

func readAll(ctx context.Context, cl *client.Client, p string) ([]byte, error) {
	f, err := cl.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// pcRecord is record seq's payload: its number, then bytes derived from it.
func pcRecord(seed uint64, seq int) []byte {
	return append([]byte(fmt.Sprintf("%08d:", seq)), pcBytes(seed^uint64(seq)<<20, 100+seq%3000)...)
}

// appendOne appends record seq to the current log file.
func (w *pcWork) appendOne(ctx context.Context, f *client.File, log string, seq int) {
	if _, err := f.Append(pcRecord(w.seed, seq)); err != nil {
		w.failed("append", err)
		return
	}
	w.mu.Lock()
	w.recs[log] = append(w.recs[log], seq)
	w.mu.Unlock()
}

// verifyLog reads log's records and checks every acknowledged one is there
// with its bytes; records whose append failed may be there or not.
func (w *pcWork) verifyLog(ctx context.Context, log string) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	f, err := w.cl.Open(octx, log)
	if err != nil {
		return err
	}
	defer f.Close()
	rr := client.NewRecordReader(f, 0)
	seen := map[int]bool{}
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var seq int
		if _, err := fmt.Sscanf(string(rec.Data), "%08d:", &seq); err != nil || !bytes.Equal(rec.Data, pcRecord(w.seed, seq)) {
			w.fail("%s: a record whose bytes are not any appended (%d bytes)", log, len(rec.Data))
			continue
		}
		seen[seq] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.recs[log] {
		if !seen[s] {
			w.failures = append(w.failures, fmt.Sprintf("%s: acknowledged record %d not read back", log, s))
		}
	}
	w.records += int64(len(w.recs[log]))
	return nil
}

// appender appends to log files in turn until stop, verifying and
// deleting the oldest beyond pcLogs.
func (w *pcWork) appender(ctx context.Context, stop <-chan struct{}) {
	seq := 0
	for n := 0; ; n++ {
		log := fmt.Sprintf("/log%04d", n)
		f, err := w.cl.Create(ctx, log) // its appends run under the context it is opened with
		if err != nil {
			w.failed("create log", err)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.mu.Lock()
		w.logs = append(w.logs, log)
		w.mu.Unlock()
		for range pcLogRecs {
			select {
			case <-stop:
				f.Close()
				return
			default:
			}
			w.appendOne(ctx, f, log, seq)
			seq++
		}
		f.Close()
		w.retireLog(ctx)
	}
}

// retireLog verifies and deletes the oldest log beyond pcLogs; one that
// cannot be read now stays for the end's verification.
func (w *pcWork) retireLog(ctx context.Context) {
	w.mu.Lock()
	if len(w.logs) <= pcLogs {
		w.mu.Unlock()
		return
	}
	old := w.logs[0]
	before := len(w.failures)
	w.mu.Unlock()
	if err := w.verifyLog(ctx, old); err != nil {
		w.failed("verify log", err)
		return
	}
	w.mu.Lock()
	bad := len(w.failures) > before
	w.mu.Unlock()
	if bad {
		w.diagnose(old) // kept for the end to look at again
		w.mu.Lock()
		w.logs = slices.Delete(w.logs, 0, 1)
		w.kept = append(w.kept, old)
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	w.logs = w.logs[1:]
	delete(w.recs, old)
	w.mu.Unlock()
	if err := w.cl.Remove(ctx, old); err != nil {
		w.failed("remove log", err)
	}
}

// TestProcessCampaign: the chunkfs binary as a master and five
// chunkservers (R = 3) on loopback; a driver injects faults at random —
// SIGKILL and restart of a chunkserver or of the master, SIGSTOP then
// SIGCONT of a chunkserver, its data directory made unwritable (chmod 0;
// the chunkservers run as nobody when the test is root), its disk (a tmpfs
// of its own) filled up, a byte flipped in a replica — one chunkserver
// under a fault at a time, while a writer writes and deletes files, an
// appender appends records, and a reader reads acknowledged files back.
// Every read must be right; at the end every acknowledged file and record
// reads back intact, every chunk has 3 healthy replicas, and admin fsck
// exits 0. -pcampaign.faults 1000 is the long run (over 500 faults).
func TestProcessCampaign(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if *procSeed != 0 {
		seed = *procSeed
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	c := startPCCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(*procFaults)*time.Second)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Caller, cfg.RetryTimeout = c.masterAddr, chunkfs.Root, 20*time.Second
	cl, err := client.New(ctx, cfg)
	for start := time.Now(); err != nil && time.Since(start) < time.Minute; {
		time.Sleep(100 * time.Millisecond) // the master process is starting
		cl, err = client.New(ctx, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := &pcWork{cl: cl, seed: seed, files: map[string][]byte{}, recs: map[string][]int{}, errs: map[string]int{}, t: t}

	w.diagnose = func(log string) { c.diagnoseLog(ctx, cl, w, log) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w.writeOne(ctx, i)
		}
	}()
	go func() {
		defer wg.Done()
		w.appender(ctx, stop)
	}()
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 12))
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			w.readOne(ctx, r)
		}
	}()

	faults := c.drive(ctx, cl, w, rng)
	close(stop)
	wg.Wait()
	for i, s := range c.cs {
		if s.fault != "" {
			if err := c.restore(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.verifyEnd(ctx, cl, w, faults)
}

// drive injects *procFaults faults.
func (c *pcCluster) drive(ctx context.Context, cl *client.Client, w *pcWork, rng *rand.Rand) map[string]int {
	t := c.t
	faults := map[string]int{}
	flipped := map[chunkfs.Handle]bool{}
	kinds := []string{"kill", "stop", "unwritable", "full"}
	note := func(format string, args ...any) {
		if *procErrs {
			t.Logf(format, args...)
		}
	}
	for range *procFaults {
		time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		faulted := slices.IndexFunc(c.cs, func(s *pcServer) bool { return s.fault != "" })
		switch k := rng.IntN(6); {
		case faulted >= 0 && k < 3:
			what := c.cs[faulted].fault
			if err := c.restore(faulted); err != nil {
				t.Fatalf("restoring cs%d from %s: %v", faulted, what, err)
			}
			faults["restore "+what]++
			note("restored cs%d from %s", faulted, what)
		case faulted < 0 && k < 3:
			i, f := rng.IntN(pcServers), kinds[rng.IntN(len(kinds))]
			if f == "full" && c.cs[i].mount == "" {
				f = "kill"
			}
			if err := c.inject(i, f); err != nil {
				t.Fatalf("%s cs%d: %v", f, i, err)
			}
			faults[f]++
			note("%s cs%d", f, i)
		case k == 3:
			c.restartMaster(ctx, cl)
			faults["restart master"]++
			note("restarted the master")
		default:
			if c.flipOne(ctx, cl, w, flipped, rng, faulted) {
				faults["flip a byte"]++
			}
		}
	}
	return faults
}

// flipOne flips a byte of one replica of an acknowledged file's first
// chunk, on a server under no fault, once per chunk and only while the
// chunk has all its replicas: a second failure of a chunk, never a third.
func (c *pcCluster) flipOne(ctx context.Context, cl *client.Client, w *pcWork, flipped map[chunkfs.Handle]bool, rng *rand.Rand, faulted int) bool {
	w.mu.Lock()
	if len(w.order) == 0 {
		w.mu.Unlock()
		return false
	}
	p := w.order[rng.IntN(len(w.order))]
	n := len(w.files[p])
	w.mu.Unlock()
	octx, cancel := opCtx(ctx)
	defer cancel()
	chunks, err := cl.Chunks(octx, p)
	if err != nil || len(chunks) == 0 || len(chunks[0].Replicas) < 3 || flipped[chunkfs.Handle(chunks[0].Handle)] {
		return false
	}
	i := c.serverAt(chunks[0].Replicas[rng.IntN(len(chunks[0].Replicas))])
	if i < 0 || i == faulted {
		return false
	}
	flipped[chunkfs.Handle(chunks[0].Handle)] = true
	return c.flip(i, chunkfs.Handle(chunks[0].Handle), int64(rng.IntN(min(n, pcChunk)))) == nil
}

// verifyEnd waits for every chunkserver, reads every acknowledged file and
// record back, waits for every chunk to have 3 healthy replicas, and runs
// admin fsck.
func (c *pcCluster) verifyEnd(ctx context.Context, cl *client.Client, w *pcWork, faults map[string]int) {
	t := c.t
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := waitServersLive(lctx, cl, pcServers)
	cancel()
	if err != nil {
		if r, rerr := cl.ClusterReport(ctx); rerr == nil {
			for _, s := range r.Servers {
				if i := c.serverAt(s.Addr); !s.Alive && i >= 0 {
					t.Logf("cs%d (%s) not live: its process %v, stderr:\n%s", i, s.Addr, c.cs[i].p.cmd.ProcessState, tail(c.cs[i].p.out.String(), 4<<10))
				}
			}
		}
		t.Fatal(err)
	}
	for p, want := range w.files {
		octx, cancel := opCtx(ctx)
		got, err := readAll(octx, cl, p)
		cancel()
		if err != nil || !bytes.Equal(got, want) {
			w.fail("%s: acknowledged %d bytes, read %d at the end (%v)", p, len(want), len(got), err)
			continue
		}
		w.verified += int64(len(got))
	}
	for _, log := range w.kept {
		t.Logf("%s, which failed its check during the run, at the end:", log)
		c.diagnoseLog(ctx, cl, w, log)
	}
	for _, log := range w.logs {
		before := len(w.failures)
		if err := w.verifyLog(ctx, log); err != nil {
			w.fail("%s: %v", log, err)
		}
		if len(w.failures) > before {
			c.diagnoseLog(ctx, cl, w, log)
		}
	}
	if len(w.failures) > 0 {
		t.Fatalf("%d wrong reads (seed %d), first: %s", len(w.failures), w.seed, strings.Join(w.failures[:min(5, len(w.failures))], "; "))
	}
	hctx, hcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer hcancel()
	fsck, err := waitAllHealthy(hctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	r := runWith(t, invocation{master: c.masterAddr}, "admin", "fsck", "/")
	if r.code != 0 || !strings.Contains(r.stdout, "HEALTHY") {
		t.Fatalf("admin fsck: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.noteRepairs(ctx, cl)
	t.Logf("faults %v; %d files acknowledged (the last %d kept), %d bytes read back and compared, %d records; failed operations during faults %v; %d clones; fsck: %d chunks, all with 3 healthy replicas",
		faults, w.written, len(w.files), w.verified, w.records, w.errs, c.repaired, fsck.Chunks)
}

// waitServersLive waits until the master reports n live chunkservers.
func waitServersLive(ctx context.Context, cl *client.Client, n int) error {
	for {
		r, err := cl.ClusterReport(ctx)
		live := 0
		if err == nil {
			for _, s := range r.Servers {
				if s.Alive {
					live++
				}
			}
			if live == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d chunkservers live (%v)", live, n, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitAllHealthy waits until fsck finds every chunk healthy (its full
// replication, none corrupt) and nothing is being cloned.
func waitAllHealthy(ctx context.Context, cl *client.Client) (*client.FsckReport, error) {
	// Each round's calls have their own deadline, and the last answers
	// are kept: the round the deadline cuts short says nothing.
	var f *client.FsckReport
	r := &client.Report{}
	var err, rerr error
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		nf, ferr := cl.Fsck(cctx, "/")
		nr, nrerr := cl.ClusterReport(cctx)
		cancel()
		if ctx.Err() == nil {
			err, rerr = ferr, nrerr
			if ferr == nil {
				f = nf
			}
			if nrerr == nil {
				r = nr
			}
		}
		if ferr == nil && nrerr == nil && nf.Healthy == nf.Chunks && nf.Corrupt == 0 && nr.UnderReplicated == 0 && nr.BeingCloned == 0 && nr.Corrupt == 0 {
			return nf, nil
		}
		select {
		case <-ctx.Done():
			var healthy, chunks int64
			if f != nil {
				healthy, chunks = f.Healthy, f.Chunks
			}
			return nil, fmt.Errorf("not healed: fsck %d of %d chunks healthy (last error %v); report under-replicated %d, cloning %d, corrupt %d, missing %d (last error %v)\n%s",
				healthy, chunks, err, r.UnderReplicated, r.BeingCloned, r.Corrupt, r.Missing, rerr, unhealed(cl, f, r))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unhealed describes what waitAllHealthy gave up on: each server's state
// and space, and the replicas of the chunks of the first unhealthy files.
func unhealed(cl *client.Client, f *client.FsckReport, r *client.Report) string {
	var b strings.Builder
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "server %s %s: %d chunks, used %d, free %d\n", s.ID, s.State, s.Chunks, s.Used, s.Free)
	}
	if f == nil {
		return b.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shown := 0
	for _, file := range f.Files {
		if file.Status() == "HEALTHY" || shown == 8 {
			continue
		}
		shown++
		chunks, err := cl.Chunks(ctx, file.Path)
		fmt.Fprintf(&b, "%s %s (replication %d): %v\n", file.Path, file.Status(), file.Replication, err)
		for _, c := range chunks {
			fmt.Fprintf(&b, "  chunk %d v%d: %v\n", c.Handle, c.Version, c.Replicas)
		}
	}
	return b.String()
}

// diagnoseLog logs, for a log file that failed its check, which records
// each replica of each chunk holds, read straight from the chunkservers,
// and what a fresh client reads: lost on every replica, or a replica or a
// client cache that missed them.
func (c *pcCluster) diagnoseLog(ctx context.Context, cl *client.Client, w *pcWork, log string) {
	t := c.t
	chunks, err := cl.Chunks(ctx, log)
	if err != nil {
		t.Logf("%s: chunks: %v", log, err)
		return
	}
	dc := rpc.NewDataClient()
	defer dc.Close()
	for _, ch := range chunks {
		for _, addr := range ch.Replicas {
			buf := make([]byte, pcChunk)
			n, err := dc.Read(ctx, addr, chunkfs.Handle(ch.Handle), chunkfs.Version(ch.Version), 0, buf)
			t.Logf("%s chunk %d (handle %d v%d) on cs%d: %d bytes (%v), records %v", log, ch.Index, ch.Handle, ch.Version,
				c.serverAt(addr), n, err, recordSeqs(w.seed, buf[:n]))
		}
	}
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Caller = c.masterAddr, chunkfs.Root
	fresh, err := client.New(ctx, cfg)
	if err != nil {
		return
	}
	defer fresh.Close()
	data, err := readAll(ctx, fresh, log)
	t.Logf("%s through a fresh client: %d bytes (%v), records %v", log, len(data), err, recordSeqs(w.seed, data))
}

// recordSeqs lists the sequence numbers of the valid records in b, as
// ranges.
func recordSeqs(seed uint64, b []byte) string {
	rr := client.NewRecordReader(bytes.NewReader(b), 0)
	var seqs []int
	for {
		rec, err := rr.Next()
		if err != nil {
			break
		}
		var seq int
		if _, err := fmt.Sscanf(string(rec.Data), "%08d:", &seq); err == nil && bytes.Equal(rec.Data, pcRecord(seed, seq)) {
			seqs = append(seqs, seq)
		}
	}
	var out []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		out = append(out, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		i = j + 1
	}
	return strings.Join(out, ",")
}
