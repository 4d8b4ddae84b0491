// Package metadata is `chunkfs bench metadata`: the master at the scale of
// GFS's Cluster B. It builds a namespace of that shape on a real master
// through its RPCs, with the chunkservers simulated by internal/fleet, and
// measures what the master's size decides: Table 2, operation rates over
// RPC and in-process (beside HDFS's NNThroughputBenchmark), heap,
// checkpoint and restore, restart to service, and a fleet of heartbeating
// servers under a metadata workload.
//
// Unlike package bench, whose benchmarks are client applications, it runs
// the master in-process and speaks the wire: what it measures is the
// master itself.
package metadata
