package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// obsNet is the observer benchmark's network: one switch namespace with a
// bridge, unshaped, and a namespace per host (each master, the
// chunkserver, the load generator), in 198.19.16.0/24 (inside the
// benchmarking range 198.18.0.0/15, apart from the GFS testbed's).
type obsNet struct {
	tb        *Testbed // only its namespace plumbing: hosts on one bridge
	Masters   []Host
	Chunk     Host
	Generator Host
}

func obsAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 16, byte(i)}) }

// buildObsNet makes the namespaces of masters masters; on error it removes
// what it made.
func buildObsNet(ctx context.Context, prefix string, masters int, log *slog.Logger) (*obsNet, error) {
	tb := &Testbed{cfg: TestbedConfig{Prefix: prefix, MTU: 1500}, cmd: execCommander{log: log}, log: log, switchNS: prefix + "sw"}
	n := &obsNet{tb: tb,
		Chunk:     Host{NS: prefix + "cs", Port: "cs", Addr: obsAddr(2)},
		Generator: Host{NS: prefix + "lg", Port: "lg", Addr: obsAddr(3)}}
	for i := 1; i <= masters; i++ {
		n.Masters = append(n.Masters, Host{NS: fmt.Sprintf("%sm%d", prefix, i), Port: fmt.Sprintf("m%d", i), Addr: obsAddr(10 + i)})
	}
	err := tb.buildSwitches(ctx)
	for _, h := range append([]Host{n.Chunk, n.Generator}, n.Masters...) {
		if err == nil {
			err = tb.addHost(ctx, h, chunkBridge)
		}
	}
	if err != nil {
		return nil, errors.Join(err, tb.Close())
	}
	return n, nil
}

func (n *obsNet) close() error { return n.tb.Close() }

// cgroupRoot is where cgroup v1's cpu controller is mounted.
const cgroupRoot = "/sys/fs/cgroup/cpu"

// cpuCap is a cgroup v1 cpu group that holds a process to a share of one
// CPU (cpu.cfs_quota_us over cpu.cfs_period_us) and weighs it above the
// machine's other processes (cpu.shares), so that on a busy machine the
// cap, not the others' load, is what limits it: each master behaves as a
// host with a small CPU of its own, and the uncapped load generator gets
// the CPU it asks for.
type cpuCap struct{ dir string }

const (
	cfsPeriod = 100000 // µs
	// masterShares and generatorShares are 16 and 32 times a process's
	// default weight (1024): on this 2-core machine, at a load average of
	// 30, 4x was not enough for the generator to keep its schedule.
	masterShares    = 16384
	generatorShares = 32768
)

// newCPUCap makes the group name (a path under cgroupRoot) capped to cpus
// CPUs, 0 meaning no cap, with weight shares.
func newCPUCap(name string, cpus float64, shares int) (*cpuCap, error) {
	dir := filepath.Join(cgroupRoot, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	c := &cpuCap{dir: dir}
	quota := -1
	if cpus > 0 {
		quota = int(cpus * cfsPeriod)
	}
	err := c.write("cpu.cfs_period_us", strconv.Itoa(cfsPeriod))
	if err == nil {
		err = c.write("cpu.cfs_quota_us", strconv.Itoa(quota))
	}
	if err == nil {
		err = c.write("cpu.shares", strconv.Itoa(shares))
	}
	if err != nil {
		return nil, errors.Join(err, c.remove())
	}
	return c, nil
}

func (c *cpuCap) write(file, val string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(val), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", c.dir, err)
	}
	return nil
}

// add moves process pid (all its threads) into the group.
func (c *cpuCap) add(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// throttled returns the group's periods and the periods it was throttled
// in, and the time it was held back (cpu.stat).
func (c *cpuCap) throttled() (periods, throttled int64, seconds float64) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		case "throttled_time":
			seconds = float64(n) / 1e9
		}
	}
	return periods, throttled, seconds
}

// remove removes the group; its processes must have ended.
func (c *cpuCap) remove() error {
	if err := os.Remove(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// removeCgroups removes the groups under cgroupRoot whose names start with
// prefix, children first (leftovers of a killed run; their processes died
// with its namespaces).
func removeCgroups(prefix string) error {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, prefix+"*"))
	var errs []error
	for _, d := range dirs {
		kids, _ := filepath.Glob(filepath.Join(d, "*", "cgroup.procs"))
		for _, k := range kids {
			errs = append(errs, ignoreMissing(os.Remove(filepath.Dir(k))))
		}
		errs = append(errs, ignoreMissing(os.Remove(d)))
	}
	return errors.Join(errs...)
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// procCPU is process pid's user and system CPU time, in seconds
// (/proc/PID/stat, in clock ticks of 1/100 s).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}
