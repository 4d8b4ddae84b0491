package web

import (
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/metrics"
)

func gauge(name, help string, v float64, labels ...metrics.Label) metrics.Figure {
	return metrics.Figure{Name: name, Help: help, Value: v, Labels: labels}
}

func counter(name, help string, v float64, labels ...metrics.Label) metrics.Figure {
	return metrics.Figure{Name: name, Help: help, Kind: metrics.Counter, Value: v, Labels: labels}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// raftStates are the values of chunkfs_raft_state's state label.
var raftStates = []string{"standalone", "leader", "follower", "observer"}

// masterFigures are a master's figures as metrics.
func masterFigures(f master.Figures) []metrics.Figure {
	r, live, dead := f, float64(f.LiveServers), float64(f.DeadServers)
	out := []metrics.Figure{
		gauge("chunkfs_files", "Files in the namespace.", float64(r.Files)),
		gauge("chunkfs_directories", "Directories in the namespace.", float64(r.Dirs)),
		gauge("chunkfs_file_bytes", "Sum of the files' lengths.", float64(r.Bytes)),
		gauge("chunkfs_chunks", "Chunks in the namespace.", float64(r.Chunks)),
		gauge("chunkfs_replicas", "Replicas the master has located on live chunkservers.", float64(f.Replicas)),
		gauge("chunkfs_chunks_under_replicated", "Chunks with fewer live replicas than their file's replication.", float64(r.UnderReplicated)),
		gauge("chunkfs_chunks_missing", "Chunks holding data with no live current replica: their data cannot be read.", float64(r.Missing)),
		gauge("chunkfs_chunks_being_cloned", "Chunks with a re-replication in flight (the repair queue being worked).", float64(r.BeingCloned)),
		gauge("chunkfs_replicas_corrupt", "Corrupt replicas reported and not yet replaced.", float64(r.Corrupt)),
		gauge("chunkfs_repair_bytes_per_second", "Bytes a second cloned by re-replication over the last minute.", r.RepairRate),
		counter("chunkfs_repaired_chunks_total", "Clones completed since the master started.", float64(r.Repaired)),
		gauge("chunkfs_chunkservers", "Chunkservers the master knows, by state.", live, metrics.Label{Name: "state", Value: "live"}),
		gauge("chunkfs_chunkservers", "Chunkservers the master knows, by state.", dead, metrics.Label{Name: "state", Value: "dead"}),
		gauge("chunkfs_safe_mode", "1 while the master is in safe mode and creates no chunk.", boolValue(r.SafeMode)),
		gauge("chunkfs_leases_held", "Chunks with a primary's lease valid now.", float64(f.Leases)),
		gauge("chunkfs_raft_applied_index", "Index of the last log entry this master applied.", float64(f.Applied)),
		gauge("chunkfs_raft_commit_index", "Commit index this master knows.", float64(f.Commit)),
		gauge("chunkfs_master_metadata_bytes", "Heap bytes of the master's namespace and chunk registry, estimated (GFS Table 2's metadata at master).", float64(f.MetadataBytes)),
	}
	for _, st := range raftStates {
		out = append(out, gauge("chunkfs_raft_state", "1 for this master's role in its group, 0 for the others.", boolValue(f.Role == st), metrics.Label{Name: "state", Value: st}))
	}
	return out
}

// reads is the count of a chunkserver's data-stream reads of one kind.
func reads(n int64, kind string) metrics.Figure {
	return counter("chunkfs_stream_reads_total", "Data-stream reads served: clients' (client), paced clones' (clone) and urgent clones' (urgent, a chunk's one live replica).", float64(n), metrics.Label{Name: "kind", Value: kind})
}

// chunkserverFigures are a chunkserver's figures as metrics.
func chunkserverFigures(f chunkserver.Figures) []metrics.Figure {
	out := []metrics.Figure{
		gauge("chunkfs_chunkserver_chunks", "Replicas this chunkserver holds.", float64(f.Chunks)),
		gauge("chunkfs_chunkserver_used_bytes", "Bytes of chunk data this chunkserver holds.", float64(f.Used)),
		gauge("chunkfs_chunkserver_metadata_bytes", "Bytes of its chunks' metadata files: versions and block checksums.", float64(f.MetadataBytes)),
		gauge("chunkfs_chunkserver_replicas_corrupt", "Corrupt replicas this chunkserver holds.", float64(len(f.Corrupt))),
		gauge("chunkfs_push_buffer_bytes", "Pushed data held in memory, waiting to be applied.", float64(f.BufferUsed)),
		gauge("chunkfs_push_buffer_limit_bytes", "Bound on pushed data held in memory.", float64(f.BufferLimit)),
		gauge("chunkfs_chunkserver_load", "Operations in flight.", float64(f.Load)),
		gauge("chunkfs_clones_running", "Re-replications this server runs as a target.", float64(f.Clones)),
		counter("chunkfs_stream_bytes_total", "Chunk data bytes moved on the data stream: read (sent to readers and clones) or written (pushes accepted whole).", float64(f.BytesRead), metrics.Label{Name: "direction", Value: "read"}),
		counter("chunkfs_stream_bytes_total", "Chunk data bytes moved on the data stream: read (sent to readers and clones) or written (pushes accepted whole).", float64(f.BytesWritten), metrics.Label{Name: "direction", Value: "written"}),
		reads(f.Reads.Foreground, "client"), reads(f.Reads.Background, "clone"), reads(f.Reads.Urgent, "urgent"),
		counter("chunkfs_stream_reads_paced_total", "Data-stream reads paced at some time: clones' by the clone-source throttle, any yielding to an urgent clone.", float64(f.Reads.Paced)),
		counter("chunkfs_scrubbed_chunks_total", "Chunks the scrubber has verified since start.", float64(f.Scrubbed)),
	}
	for _, d := range f.Disks {
		l := metrics.Label{Name: "disk", Value: d.ID}
		out = append(out,
			gauge("chunkfs_disk_capacity_bytes", "Size of a disk holding chunk data.", float64(d.Total), l),
			gauge("chunkfs_disk_free_bytes", "Bytes free to the chunkserver on a disk.", float64(d.Free), l))
	}
	return out
}
