package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// recorder is a commander that records commands and fails the one that
// contains failOn.
type recorder struct {
	cmds   []string
	failOn string
	output map[string]string
}

func (r *recorder) run(_ context.Context, name string, args ...string) (string, error) {
	line := name + " " + strings.Join(args, " ")
	r.cmds = append(r.cmds, line)
	if r.failOn != "" && strings.Contains(line, r.failOn) {
		return "", errors.New("injected failure")
	}
	return r.output[line], nil
}

func (r *recorder) runInput(ctx context.Context, input, name string, args ...string) (string, error) {
	return r.run(ctx, name, append(args, "<<", input)...)
}

func (r *recorder) count(sub string) int {
	n := 0
	for _, c := range r.cmds {
		if strings.Contains(c, sub) {
			n++
		}
	}
	return n
}

func smallTestbed(rec *recorder) *Testbed {
	cfg := DefaultTestbedConfig()
	cfg.Chunkservers, cfg.Clients = 3, 2
	return newTestbed(cfg, rec, slog.New(slog.DiscardHandler))
}

func TestTestbedTopology(t *testing.T) {
	rec := &recorder{}
	tb := smallTestbed(rec)
	if err := tb.Build(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A switch namespace plus master, 3 chunkservers, 2 clients.
	if n := rec.count("ip netns add cfsb-"); n != 7 {
		t.Errorf("%d namespaces added, want 7", n)
	}
	for _, want := range []string{
		"ip -n cfsb-sw link set dev cs03 master brcs up",
		"ip -n cfsb-sw link set dev cl02 master brcl up",
		"ip -n cfsb-sw link set dev mst master brcs up",
		"ip -n cfsb-cs02 addr add 198.18.1.2/16 dev eth0",
		"ip -n cfsb-cl01 addr add 198.18.2.1/16 dev eth0",
		"ip -n cfsb-m addr add 198.18.0.1/16 dev eth0",
		"tc -n cfsb-sw qdisc replace dev trcs root tbf rate 100000000bit",
		"tc -n cfsb-sw qdisc replace dev trcl root tbf rate 100000000bit",
		"tc -n cfsb-cl02 -batch - << qdisc replace dev eth0 root handle 9: pfifo\nqdisc replace dev eth0 root handle 1: htb",
		"tc -n cfsb-sw qdisc replace dev cl02 root tbf rate 10000000bit",
	} {
		if rec.count(want) != 1 {
			t.Errorf("missing or repeated: %s", want)
		}
	}
	if n := rec.count("nsenter --net=/run/netns/cfsb-cs02 -- sysctl -q -w net.ipv4.tcp_congestion_control=reno"); n != 1 {
		t.Errorf("chunkserver 2's TCP set %d times, want once", n)
	}
	if n := rec.count("tcp_congestion_control"); n != 6 {
		t.Errorf("TCP set in %d namespaces, want 6 (every host)", n)
	}
	// Every NIC is shaped both ways (6 hosts × 2) and the link both ways.
	if n := rec.count("qdisc replace"); n != 14 {
		t.Errorf("%d shaped queues, want 14", n)
	}
	for _, c := range rec.cmds {
		if strings.Contains(c, "addr add") && !strings.Contains(c, "198.18.") {
			t.Errorf("address outside 198.18.0.0/15: %s", c)
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("ip netns del cfsb-"); n != 7 {
		t.Errorf("%d namespaces removed, want 7", n)
	}
}

func TestTestbedBuildFailureRemovesWhatItMade(t *testing.T) {
	rec := &recorder{failOn: "addr add 198.18.1.2"}
	tb := smallTestbed(rec)
	if err := tb.Build(context.Background()); err == nil {
		t.Fatal("Build succeeded despite a failing command")
	}
	added, removed := rec.count("ip netns add"), rec.count("ip netns del")
	if added == 0 || added != removed {
		t.Errorf("added %d namespaces, removed %d", added, removed)
	}
}

func TestCleanupRemovesOnlyPrefixed(t *testing.T) {
	rec := &recorder{output: map[string]string{
		"ip netns list": "cfsb-cs01 (id: 3)\nother-ns (id: 1)\ncfsb-sw\n",
	}}
	if err := cleanup(context.Background(), rec, "cfsb-"); err != nil {
		t.Fatal(err)
	}
	if rec.count("ip netns del cfsb-cs01") != 1 || rec.count("ip netns del cfsb-sw") != 1 || rec.count("other-ns") != 0 {
		t.Errorf("cleanup commands: %q", rec.cmds)
	}
}

// TestLeftoverDirsOfThisTestbedOnly: a run removes the work directories
// of earlier runs on its own testbed, never those of another benchmark
// running beside it on a testbed with another prefix (bench recovery
// used to remove a running bench gfs's logs and data).
func TestLeftoverDirsOfThisTestbedOnly(t *testing.T) {
	root := t.TempDir()
	mine, err := os.MkdirTemp(root, workDirPattern(DefaultRecoveryPrefix))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.MkdirTemp(root, workDirPattern(DefaultPrefix))
	if err != nil {
		t.Fatal(err)
	}
	removeLeftoverDirs(root, DefaultRecoveryPrefix, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(mine); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the leftover of this testbed's run is still there: %v", err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("the work directory of a run on testbed %q was removed: %v", DefaultPrefix, err)
	}
}

// TestHostQueues checks the two host queueing disciplines: fq gives every
// host NIC an htb at the NIC rate with fqBuckets children, each with its own
// FIFO of the configured size, and a hash filter over them; fifo gives it
// the same plain tbf as a switch port. Switch ports are a tbf either way.
func TestHostQueues(t *testing.T) {
	cmds := fqCommands("eth0", 10*Mbit, 128<<10, 1500, fqBuckets)
	joined := strings.Join(cmds, "\n")
	count := func(sub string) int { return strings.Count(joined, sub) }
	if n := count("htb rate 625000bit ceil 10000000bit"); n != fqBuckets {
		t.Errorf("%d flow queues at a sixteenth of the rate, want %d:\n%s", n, fqBuckets, joined)
	}
	if n := count("bfifo limit 131072"); n != fqBuckets {
		t.Errorf("%d FIFOs of the queue size, want %d", n, fqBuckets)
	}
	if n := count("u32 divisor 16"); n != 1+fqBuckets {
		t.Errorf("%d hash tables, want %d", n, 1+fqBuckets)
	}
	for _, want := range []string{
		"class add dev eth0 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit",
		"hashkey mask 0x0000001e at 20 link 2:",
		"handle 2: protocol ip u32 divisor 16",
	} {
		if count(want) != 1 {
			t.Errorf("missing or repeated: %s", want)
		}
	}
	// Every pair of port hashes leads to a class that exists, each class
	// from as many pairs, and each class once for a given destination.
	perClass := map[string]int{}
	for i := range fqBuckets {
		if count(fmt.Sprintf("ht 2:%x: match u32 0 0 hashkey mask 0x001e0000 at 20 link %x:", i, 3+i)) != 1 {
			t.Errorf("destination bucket %d does not link to its source table", i)
		}
		seen := map[string]bool{}
		for j := range fqBuckets {
			prefix := fmt.Sprintf("ht %x:%x: match u32 0 0 flowid ", 3+i, j)
			k := strings.Index(joined, prefix)
			if k < 0 {
				t.Fatalf("no filter for ports (%d, %d)", i, j)
			}
			class := strings.Fields(joined[k+len(prefix):])[0]
			if count("classid "+class+" ") != 1 {
				t.Errorf("ports (%d, %d) go to %s, which is not a class", i, j, class)
			}
			perClass[class]++
			seen[class] = true
		}
		if len(seen) != fqBuckets {
			t.Errorf("destination bucket %d reaches %d classes, want %d", i, len(seen), fqBuckets)
		}
	}
	for c, n := range perClass {
		if n != fqBuckets {
			t.Errorf("class %s gets %d port pairs, want %d", c, n, fqBuckets)
		}
	}

	rec := &recorder{}
	cfg := DefaultTestbedConfig()
	cfg.Chunkservers, cfg.Clients, cfg.HostQueue = 1, 1, QueueFIFO
	tb := newTestbed(cfg, rec, slog.New(slog.DiscardHandler))
	if err := tb.Build(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.count("-batch") != 0 || rec.count("tc -n cfsb-cl01 qdisc replace dev eth0 root tbf rate 10000000bit") != 1 {
		t.Errorf("fifo host queue: %q", rec.cmds)
	}
	cfg.HostQueue = "red"
	if cfg.Validate() == nil {
		t.Error("unknown host queue accepted")
	}
}

func TestTBFBurst(t *testing.T) {
	if b := tbfBurst(10*Mbit, 1500); b != 2*1514 {
		t.Errorf("burst at 10 Mbit/s = %d, want two frames", b)
	}
	if b := tbfBurst(1000*Mbit, 1500); b != 125000 {
		t.Errorf("burst at 1 Gbit/s = %d, want 1 ms", b)
	}
}

func TestTestbedConfigValidate(t *testing.T) {
	bad := []func(*TestbedConfig){
		func(c *TestbedConfig) { c.Prefix = "" },
		func(c *TestbedConfig) { c.Prefix = "much-too-long-" },
		func(c *TestbedConfig) { c.Chunkservers = 0 },
		func(c *TestbedConfig) { c.Clients = 251 },
		func(c *TestbedConfig) { c.NIC = 0 },
		func(c *TestbedConfig) { c.Queue = 0 },
		func(c *TestbedConfig) { c.MTU = 100 },
		func(c *TestbedConfig) { c.TCP = "reno; reboot" },
		func(c *TestbedConfig) { c.TCP = "../x" },
	}
	for i, mutate := range bad {
		c := DefaultTestbedConfig()
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
	if err := DefaultTestbedConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}
