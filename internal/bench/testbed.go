package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPrefix starts the name of every namespace a testbed creates.
const DefaultPrefix = "cfsb-"

// TestbedConfig describes a testbed's hosts and shaping.
type TestbedConfig struct {
	// Prefix starts every namespace name; leftovers with it are removed by
	// Cleanup. It must be short: interface names are limited to 15 bytes.
	Prefix       string
	Chunkservers int  // hosts on the chunkserver switch, besides the master
	Clients      int  // hosts on the client switch
	NIC          Rate // every host NIC, each direction
	Link         Rate // the inter-switch link, each direction
	// Queue is the bytes each shaped queue (a switch port's buffer, a NIC's
	// queue) holds before it drops. It is bytes, as in hardware, so the
	// scaled-down network has the paper's buffers and packet dynamics in
	// slow motion. Small queues drop the ACKs that share a forwarding
	// chunkserver's egress with its data (docs/architecture.md §10).
	Queue int
	MTU   int
	// HostQueue is the queueing discipline under each host NIC's shaper:
	// QueueFQ (the default) or QueueFIFO. Switch ports and the
	// inter-switch link are always one FIFO, as in the paper's switches.
	HostQueue string
	// FQBuckets is how many flow queues a host NIC has under QueueFQ: a
	// power of two, 4-64 (default 16). fq_codel has 1024; fewer means
	// flows collide in a queue more often (two of four flows through one
	// NIC share a queue a third of the time with 16). Zero means the
	// default.
	FQBuckets int
	// TCP is the congestion control every host's TCP uses, set in its
	// namespace (net.ipv4.tcp_congestion_control); "" keeps what a new
	// namespace inherits from the machine. Namespaces may only pick from
	// net.ipv4.tcp_allowed_congestion_control.
	TCP string
}

// Host queueing disciplines (TestbedConfig.HostQueue).
const (
	// QueueFQ is flow queueing, what Linux puts on a NIC by default
	// (fq_codel): each flow waits in its own queue and the queues take
	// turns, so the ACKs a forwarding chunkserver sends upstream do not
	// wait behind the data it forwards downstream. This kernel has no
	// fq_codel, so it is built from what it has: an htb class at the NIC
	// rate with fqBuckets children taking turns a frame at a time, TCP
	// packets hashed to them by port (see shapeHost). A child under its
	// fair share is served first, as fq_codel serves a flow that has
	// just become active first.
	QueueFQ = "fq"
	// QueueFIFO is one FIFO per NIC (a plain tbf), as the switch ports.
	QueueFIFO = "fifo"
)

// DefaultTestbedConfig returns the paper's topology at 1/10 of its rates:
// 16 chunkservers and 16 clients with 10 Mbit/s NICs, a 100 Mbit/s link.
func DefaultTestbedConfig() TestbedConfig {
	return TestbedConfig{
		Prefix:       DefaultPrefix,
		Chunkservers: 16,
		Clients:      16,
		NIC:          10 * Mbit,
		Link:         100 * Mbit,
		Queue:        256 << 10,
		MTU:          1500,
		HostQueue:    QueueFQ,
		TCP:          DefaultTCP,
	}
}

// DefaultTCP is the testbed hosts' congestion control: Reno, loss-based
// like the TCP of the paper's hosts and like Linux's default (cubic, which
// a namespace here may not pick). This machine's own default, BBR (v1),
// paced by a minimum RTT measured while the switch queues were empty,
// starves a chain whose ACKs queue behind data at a switch port: with it
// the contended points lose 10-15 points (docs/architecture.md §10).
const DefaultTCP = "reno"

// Validate reports whether the configuration can be built.
func (c TestbedConfig) Validate() error {
	switch {
	case c.Prefix == "" || len(c.Prefix) > 8 || strings.ContainsAny(c.Prefix, "/ \t"):
		return fmt.Errorf("testbed prefix %q must be 1-8 bytes without spaces or slashes", c.Prefix)
	case c.Chunkservers < 1 || c.Chunkservers > 250:
		return fmt.Errorf("testbed chunkservers %d out of range 1-250", c.Chunkservers)
	case c.Clients < 1 || c.Clients > 250:
		return fmt.Errorf("testbed clients %d out of range 1-250", c.Clients)
	case c.NIC < 8000 || c.Link < 8000:
		return fmt.Errorf("testbed rates %v and %v must be at least 8 kbit/s", c.NIC, c.Link)
	case c.Queue < 2*(c.MTU+14) || c.Queue > 64<<20:
		return fmt.Errorf("testbed queue of %d bytes out of range (two frames to 64 MiB)", c.Queue)
	case c.MTU < 576 || c.MTU > 65000:
		return fmt.Errorf("testbed MTU %d out of range 576-65000", c.MTU)
	case len(c.TCP) > 16 || strings.Trim(c.TCP, "abcdefghijklmnopqrstuvwxyz0123456789_") != "":
		return fmt.Errorf("testbed TCP congestion control %q is not a plain name", c.TCP)
	case c.HostQueue != QueueFQ && c.HostQueue != QueueFIFO:
		return fmt.Errorf("testbed host queue %q is neither %q nor %q", c.HostQueue, QueueFQ, QueueFIFO)
	case c.FQBuckets != 0 && (c.FQBuckets < 4 || c.FQBuckets > 64 || c.FQBuckets&(c.FQBuckets-1) != 0):
		return fmt.Errorf("testbed flow queues %d: want a power of two from 4 to 64", c.FQBuckets)
	}
	return nil
}

// Host is one machine of the testbed: a namespace with one NIC.
type Host struct {
	NS   string     // network namespace name
	Port string     // its port's interface name in the switch namespace
	Addr netip.Addr // its address, in 198.18.0.0/15
}

// The testbed's addressing: one flat /16 inside 198.18.0.0/15, the range
// reserved for network benchmarking (RFC 2544); it exists only inside the
// testbed's namespaces.
const prefixLen = 16

var (
	masterAddr      = netip.AddrFrom4([4]byte{198, 18, 0, 1})
	chunkserverBase = [3]byte{198, 18, 1}
	clientBase      = [3]byte{198, 18, 2}
)

// Testbed is a built (or being built) network of namespaces. Close removes
// it. A Testbed is used by one goroutine.
type Testbed struct {
	cfg          TestbedConfig
	cmd          commander
	log          *slog.Logger
	Master       Host
	Chunkservers []Host
	Clients      []Host
	switchNS     string
	created      []string // namespaces created so far, for Close
}

// Interface names inside namespaces. They need no prefix: they live only in
// the testbed's own namespaces and vanish with them.
const (
	nicName       = "eth0"
	chunkBridge   = "brcs"
	clientBridge  = "brcl"
	trunkCSSide   = "trcs"
	trunkClntSide = "trcl"
)

// NewTestbed describes a testbed; Build creates it.
func NewTestbed(cfg TestbedConfig, log *slog.Logger) (*Testbed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newTestbed(cfg, execCommander{log: log}, log), nil
}

func newTestbed(cfg TestbedConfig, cmd commander, log *slog.Logger) *Testbed {
	tb := &Testbed{cfg: cfg, cmd: cmd, log: log, switchNS: cfg.Prefix + "sw"}
	tb.Master = Host{NS: cfg.Prefix + "m", Port: "mst", Addr: masterAddr}
	for i := 1; i <= cfg.Chunkservers; i++ {
		name := fmt.Sprintf("cs%02d", i)
		tb.Chunkservers = append(tb.Chunkservers, Host{NS: cfg.Prefix + name, Port: name, Addr: hostAddr(chunkserverBase, i)})
	}
	for i := 1; i <= cfg.Clients; i++ {
		name := fmt.Sprintf("cl%02d", i)
		tb.Clients = append(tb.Clients, Host{NS: cfg.Prefix + name, Port: name, Addr: hostAddr(clientBase, i)})
	}
	return tb
}

func hostAddr(base [3]byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(i)})
}

// Config returns the configuration the testbed was described with.
func (tb *Testbed) Config() TestbedConfig { return tb.cfg }

// Build creates the namespaces, the switches and every NIC, shaped. On error
// it removes what it created.
func (tb *Testbed) Build(ctx context.Context) error {
	err := tb.build(ctx)
	if err != nil {
		err = errors.Join(err, tb.Close())
	}
	return err
}

func (tb *Testbed) build(ctx context.Context) error {
	if err := tb.buildSwitches(ctx); err != nil {
		return err
	}
	if err := tb.addHost(ctx, tb.Master, chunkBridge); err != nil {
		return err
	}
	for _, h := range tb.Chunkservers {
		if err := tb.addHost(ctx, h, chunkBridge); err != nil {
			return err
		}
	}
	for _, h := range tb.Clients {
		if err := tb.addHost(ctx, h, clientBridge); err != nil {
			return err
		}
	}
	return tb.Shape(ctx, tb.cfg.NIC, tb.cfg.Link)
}

// buildSwitches makes the switch namespace: two bridges joined by a veth
// pair, the inter-switch link.
func (tb *Testbed) buildSwitches(ctx context.Context) error {
	if err := tb.addNS(ctx, tb.switchNS); err != nil {
		return err
	}
	mtu := fmt.Sprint(tb.cfg.MTU)
	return tb.ipAll(ctx, tb.switchNS,
		[]string{"link", "add", chunkBridge, "mtu", mtu, "type", "bridge"},
		[]string{"link", "add", clientBridge, "mtu", mtu, "type", "bridge"},
		[]string{"link", "add", trunkCSSide, "mtu", mtu, "type", "veth", "peer", "name", trunkClntSide, "mtu", mtu},
		[]string{"link", "set", "dev", trunkCSSide, "master", chunkBridge, "up"},
		[]string{"link", "set", "dev", trunkClntSide, "master", clientBridge, "up"},
		[]string{"link", "set", "dev", chunkBridge, "up"},
		[]string{"link", "set", "dev", clientBridge, "up"},
	)
}

// addHost makes h's namespace and its NIC, plugged into bridge.
func (tb *Testbed) addHost(ctx context.Context, h Host, bridge string) error {
	if err := tb.addNS(ctx, h.NS); err != nil {
		return err
	}
	mtu := fmt.Sprint(tb.cfg.MTU)
	if _, err := tb.cmd.run(ctx, "ip", "link", "add", nicName, "netns", h.NS, "mtu", mtu, "type", "veth",
		"peer", "name", h.Port, "netns", tb.switchNS, "mtu", mtu); err != nil {
		return err
	}
	if err := tb.ipAll(ctx, tb.switchNS, []string{"link", "set", "dev", h.Port, "master", bridge, "up"}); err != nil {
		return err
	}
	if tb.cfg.TCP != "" {
		// nsenter, not ip netns exec: see startIn.
		if _, err := tb.cmd.run(ctx, "nsenter", "--net="+filepath.Join("/run/netns", h.NS), "--",
			"sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control="+tb.cfg.TCP); err != nil {
			return err
		}
	}
	return tb.ipAll(ctx, h.NS,
		[]string{"addr", "add", fmt.Sprintf("%s/%d", h.Addr, prefixLen), "dev", nicName},
		[]string{"link", "set", "dev", "lo", "up"},
		[]string{"link", "set", "dev", nicName, "up"},
	)
}

func (tb *Testbed) addNS(ctx context.Context, ns string) error {
	if _, err := tb.cmd.run(ctx, "ip", "netns", "add", ns); err != nil {
		return err
	}
	tb.created = append(tb.created, ns)
	return nil
}

// ipAll runs ip commands in namespace ns, stopping at the first failure.
func (tb *Testbed) ipAll(ctx context.Context, ns string, cmds ...[]string) error {
	for _, c := range cmds {
		if _, err := tb.cmd.run(ctx, "ip", append([]string{"-n", ns}, c...)...); err != nil {
			return err
		}
	}
	return nil
}

// Shape (re)sets the rate of every NIC, both directions, and of the
// inter-switch link, both directions. Each switch port's egress queue is a
// token bucket (tbf) whose buffer holds cfg.Queue bytes; each host NIC's is
// shaped the same way, its queue per cfg.HostQueue.
func (tb *Testbed) Shape(ctx context.Context, nic, link Rate) error {
	hosts := append([]Host{tb.Master}, tb.Chunkservers...)
	hosts = append(hosts, tb.Clients...)
	for _, h := range hosts {
		if err := tb.shapeHost(ctx, h.NS, nic); err != nil {
			return err
		}
		if err := tb.shapeDev(ctx, tb.switchNS, h.Port, nic); err != nil {
			return err
		}
	}
	if err := tb.shapeDev(ctx, tb.switchNS, trunkCSSide, link); err != nil {
		return err
	}
	return tb.shapeDev(ctx, tb.switchNS, trunkClntSide, link)
}

func (tb *Testbed) shapeDev(ctx context.Context, ns, dev string, r Rate) error {
	_, err := tb.cmd.run(ctx, "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", r.TCArg(), "burst", fmt.Sprint(tbfBurst(r, tb.cfg.MTU)),
		"limit", fmt.Sprint(tb.cfg.Queue))
	return err
}

// fqBuckets is how many flow queues a host NIC has under QueueFQ by
// default (TestbedConfig.FQBuckets).
const fqBuckets = 16

// buckets returns the configured number of flow queues.
func (c TestbedConfig) buckets() int {
	if c.FQBuckets == 0 {
		return fqBuckets
	}
	return c.FQBuckets
}

// fqChild is the flow queue, of b, of a packet whose destination port
// hashes to d and source port to s: for each d a different permutation of
// the queues, so that flows sharing one port spread over all of them.
func fqChild(d, s, b int) int { return (d + 5*s) % b }

// shapeHost shapes the egress of host namespace ns's NIC to rate r. Under
// QueueFQ: an htb root with one class at r, fqBuckets children each
// guaranteed r/fqBuckets and allowed all of r, taking turns a frame
// (quantum) at a time, each with a FIFO of cfg.Queue bytes; u32 hash
// tables send each TCP packet to a child by bits 1-4 of its destination
// and source ports (the low bit is skipped: Linux picks even ports for
// outgoing connections), so the data a chunkserver forwards to the next
// one and the ACKs it returns upstream are in different queues, as are
// flows to different readers and a client's data and RPCs to one
// chunkserver. Other packets (ARP) go to the first child. The whole
// configuration goes through one tc -batch run.
func (tb *Testbed) shapeHost(ctx context.Context, ns string, r Rate) error {
	if tb.cfg.HostQueue == QueueFIFO {
		return tb.shapeDev(ctx, ns, nicName, r)
	}
	in := strings.Join(fqCommands(nicName, r, tb.cfg.Queue, tb.cfg.MTU, tb.cfg.buckets()), "\n") + "\n"
	_, err := tb.cmd.runInput(ctx, in, "tc", "-n", ns, "-batch", "-")
	return err
}

// fqCommands returns the tc commands (without the leading "tc") that set up
// QueueFQ with b flow queues (a power of two, at most 256) on dev.
func fqCommands(dev string, r Rate, queue, mtu, b int) []string {
	frame := mtu + 14
	burst := tbfBurst(r, mtu)
	child := max(Rate(float64(r)/float64(b)), 8000)
	mask := uint32(b-1) << 1 // bits 1… of a port: Linux picks even ports for outgoing connections
	cmds := []string{
		// A root of another kind and handle first, so that the htb below
		// is made afresh (a replace of an htb would keep its classes).
		fmt.Sprintf("qdisc replace dev %s root handle 9: pfifo", dev),
		fmt.Sprintf("qdisc replace dev %s root handle 1: htb default %x", dev, 0x10),
		fmt.Sprintf("class add dev %s parent 1: classid 1:1 htb rate %s ceil %s burst %d cburst %d quantum %d",
			dev, r.TCArg(), r.TCArg(), burst, burst, frame),
	}
	for i := range b {
		cmds = append(cmds,
			fmt.Sprintf("class add dev %s parent 1:1 classid 1:%x htb rate %s ceil %s burst %d cburst %d quantum %d prio 0",
				dev, 0x10+i, child.TCArg(), r.TCArg(), burst, burst, frame),
			fmt.Sprintf("qdisc add dev %s parent 1:%x handle %x: bfifo limit %d", dev, 0x10+i, 0x10+i, queue))
	}
	// Two levels of u32 hash tables: table 2 by the destination port,
	// each of its buckets linking to a table (handles 3, 4, …) by the
	// source port, whose buckets name the child. A flow is its pair of
	// ports, as for fq_codel (the addresses add little here: a host's
	// flows to one peer differ by port), so a client's data and its RPCs
	// to the same chunkserver (one port, multiplexed) are apart. Offset 20
	// of an IP packet without options is the TCP source and destination
	// ports; each mask takes bits 1-k of one of them, for b = 2^k queues.
	cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: prio 1 handle 2: protocol ip u32 divisor %d", dev, b))
	for i := range b {
		cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: prio 1 handle %x: protocol ip u32 divisor %d", dev, 3+i, b))
	}
	cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x%08x at 20 link 2:", dev, mask))
	for i := range b {
		cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: prio 1 protocol ip u32 ht 2:%x: match u32 0 0 hashkey mask 0x%08x at 20 link %x:", dev, i, mask<<16, 3+i))
	}
	for i := range b {
		for j := range b {
			cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: prio 1 protocol ip u32 ht %x:%x: match u32 0 0 flowid 1:%x", dev, 3+i, j, 0x10+fqChild(i, j, b)))
		}
	}
	return cmds
}

// tbfBurst is the token bucket's depth in bytes: a millisecond at the rate,
// and never less than two full frames, so that the shaper neither bursts far
// above its rate nor starves on timer granularity.
func tbfBurst(r Rate, mtu int) int {
	return max(int(float64(r)/8/1000), 2*(mtu+14))
}

// Close removes every namespace the testbed created (their interfaces,
// bridges and queues go with them). Processes still running inside must
// have been stopped first. It is safe to call more than once.
func (tb *Testbed) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for i := len(tb.created) - 1; i >= 0; i-- {
		if _, err := tb.cmd.run(ctx, "ip", "netns", "del", tb.created[i]); err != nil {
			errs = append(errs, err)
		}
	}
	tb.created = nil
	return errors.Join(errs...)
}
