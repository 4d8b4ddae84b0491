// Package bench reproduces the measurements of the GFS paper's section 6.1
// (Figure 3: reads, writes and record appends by N clients) on one machine.
//
// A Testbed is a shaped network built from Linux network namespaces: one
// namespace per host (a master, the chunkservers and the clients), each with
// one veth NIC, and a switch namespace holding two bridges — chunkservers on
// one, clients on the other, as in the paper — joined by one link. Every NIC
// and the inter-switch link is shaped with tc to the paper's rates times a
// scale factor. Every name starts with a prefix so that a testbed left behind
// by a killed run is found and removed by the next one.
//
// Run builds the testbed, starts the real chunkfs master and chunkservers in
// their namespaces, and drives each workload point by starting one worker
// process per client in that client's namespace. Workers (WorkerMain) report
// their byte counts and timings as JSON lines; Run turns them into Points,
// each beside the theoretical limit derived from the shaping exactly as the
// paper derives it (see Limit), and writes a table, CSV, JSON and a PNG in
// the style of Figure 3.
//
// RunObservers is the other experiment, HDFS-12943's (observers.go): a
// group of masters, each in its own namespace and a CPU-capped cgroup, and
// one load generator process issuing a metadata workload open loop, with
// 0-100 % of its reads on the observers and then its writes alone at
// higher rates; it reports the leader's latencies, RPC queue times and CPU
// beside the generator's own.
//
// RunRecovery is GFS §6.2.5's (recovery.go): on the same testbed, it
// SIGKILLs one chunkserver, then two more, under readers and writers, and
// times re-replication against the limit the survivors' NICs and clone
// throttles set (CloneNetwork).
//
// Everything here needs root and iproute2 (ip, tc); Run says so in one line
// when they are missing.
package bench
