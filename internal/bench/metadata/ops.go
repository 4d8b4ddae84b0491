package metadata

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// metaClient is one client's way to the master: over RPC (rpcOps) or by
// calling the master's handlers in this process (directOps), as HDFS's
// NNThroughputBenchmark calls the NameNode's RPC server methods without
// the network.
type metaClient interface {
	mkdir(ctx context.Context, p string) error
	create(ctx context.Context, p string) error
	stat(ctx context.Context, p string) error
	open(ctx context.Context, p string) error // the chunk look-up a client's open makes (GetChunks)
	list(ctx context.Context, p string) error
	rename(ctx context.Context, src, dst string) error
	remove(ctx context.Context, p string) error
}

// rpcOps makes each operation one unary RPC.
type rpcOps struct{ m pb.MasterClient }

func (o rpcOps) mkdir(ctx context.Context, p string) error {
	_, err := o.m.Mkdir(ctx, &pb.MkdirRequest{Caller: root, Path: p, Mode: 0o755})
	return err
}

func (o rpcOps) create(ctx context.Context, p string) error {
	_, err := o.m.Create(ctx, &pb.CreateRequest{Caller: root, Path: p, Mode: 0o644, Exclusive: true})
	return err
}

func (o rpcOps) stat(ctx context.Context, p string) error {
	_, err := o.m.Stat(ctx, &pb.StatRequest{Caller: root, Path: p})
	return err
}

func (o rpcOps) open(ctx context.Context, p string) error {
	_, err := o.m.GetChunks(ctx, &pb.GetChunksRequest{Caller: root, Path: p})
	return err
}

func (o rpcOps) list(ctx context.Context, p string) error {
	_, err := o.m.List(ctx, &pb.ListRequest{Caller: root, Path: p})
	return err
}

func (o rpcOps) rename(ctx context.Context, src, dst string) error {
	_, err := o.m.Rename(ctx, &pb.RenameRequest{Caller: root, Src: src, Dst: dst})
	return err
}

// remove deletes at once, past the trash: HDFS's NameNode delete, which
// NNThroughputBenchmark times (HDFS's trash is a client's rename), and
// Table 2's dead files stay those built as such.
func (o rpcOps) remove(ctx context.Context, p string) error {
	_, err := o.m.Delete(ctx, &pb.DeleteRequest{Caller: root, Path: p, Recursive: true, SkipTrash: true})
	return err
}

// directOps calls the master's RPC handlers in-process: the same
// validation, permission checks, log and state, without gRPC, the socket
// or the guards the server runs before a handler.
type directOps struct{ m pb.MasterServer }

func (o directOps) mkdir(ctx context.Context, p string) error {
	_, err := o.m.Mkdir(ctx, &pb.MkdirRequest{Caller: root, Path: p, Mode: 0o755})
	return err
}

func (o directOps) create(ctx context.Context, p string) error {
	_, err := o.m.Create(ctx, &pb.CreateRequest{Caller: root, Path: p, Mode: 0o644, Exclusive: true})
	return err
}

func (o directOps) stat(ctx context.Context, p string) error {
	_, err := o.m.Stat(ctx, &pb.StatRequest{Caller: root, Path: p})
	return err
}

func (o directOps) open(ctx context.Context, p string) error {
	_, err := o.m.GetChunks(ctx, &pb.GetChunksRequest{Caller: root, Path: p})
	return err
}

func (o directOps) list(ctx context.Context, p string) error {
	_, err := o.m.List(ctx, &pb.ListRequest{Caller: root, Path: p})
	return err
}

func (o directOps) rename(ctx context.Context, src, dst string) error {
	_, err := o.m.Rename(ctx, &pb.RenameRequest{Caller: root, Src: src, Dst: dst})
	return err
}

func (o directOps) remove(ctx context.Context, p string) error {
	_, err := o.m.Delete(ctx, &pb.DeleteRequest{Caller: root, Path: p, Recursive: true, SkipTrash: true})
	return err
}

// OpRate is one operation's throughput: Ops operations by Clients
// goroutines in Elapsed.
type OpRate struct {
	Op      string        `json:"op"`
	Mode    string        `json:"mode"` // "rpc" or "in-process"
	Clients int           `json:"clients"`
	Ops     int           `json:"ops"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// PerSecond is the rate.
func (r OpRate) PerSecond() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// rateOps are the operations timed, in order: each later one uses what
// the earlier made (rename the created files, delete the renamed ones).
var rateOps = []string{"mkdir", "create", "stat", "open", "list", "rename", "delete"}

// opRun times each operation of rateOps by len(clients) goroutines, n in
// all, under prefix (made first, removed after); stat, open and list go
// to the shape's files and directories, spread by a hash.
func opRun(ctx context.Context, mode string, clients []metaClient, n int, s shape, prefix string) ([]OpRate, error) {
	per := max(n/len(clients), 1)
	for c, o := range clients {
		for _, d := range []string{fmt.Sprintf("%s/mk/c%d", prefix, c), fmt.Sprintf("%s/cr/c%d", prefix, c)} {
			if err := mkdirAll(ctx, o, d); err != nil {
				return nil, err
			}
		}
	}
	var out []OpRate
	for _, op := range rateOps {
		start := time.Now()
		err := parallel(ctx, len(clients), len(clients), func(ctx context.Context, c int) error {
			for i := range per {
				if err := oneOp(ctx, clients[c], op, prefix, c, i, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("%s %s: %v", mode, op, err)
		}
		out = append(out, OpRate{Op: op, Mode: mode, Clients: len(clients), Ops: per * len(clients), Elapsed: time.Since(start)})
	}
	return out, clients[0].remove(ctx, prefix)
}

// mkdirAll makes p and its parents.
func mkdirAll(ctx context.Context, o metaClient, p string) error {
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if err := o.mkdir(ctx, p[:i]); err != nil && o.stat(ctx, p[:i]) != nil {
				return fmt.Errorf("mkdir %s: %v", p[:i], err)
			}
		}
	}
	return nil
}

// pickFile picks the shape's file for operation i of client c.
func pickFile(s shape, c, i int) int {
	return int((uint64(i)*2654435761 + uint64(c)*40503) % uint64(s.files()))
}

// oneOp does operation i of client c.
func oneOp(ctx context.Context, o metaClient, op, prefix string, c, i int, s shape) error {
	created := fmt.Sprintf("%s/cr/c%d/f%d", prefix, c, i)
	renamed := fmt.Sprintf("%s/cr/c%d/r%d", prefix, c, i)
	switch op {
	case "mkdir":
		return o.mkdir(ctx, fmt.Sprintf("%s/mk/c%d/d%d", prefix, c, i))
	case "create":
		return o.create(ctx, created)
	case "stat":
		return o.stat(ctx, s.filePath(pickFile(s, c, i)))
	case "open":
		return o.open(ctx, s.filePath(pickFile(s, c, i)))
	case "list":
		return o.list(ctx, dirPath(pickFile(s, c, i)%s.dirs()))
	case "rename":
		return o.rename(ctx, created, renamed)
	case "delete":
		return o.remove(ctx, renamed)
	}
	return fmt.Errorf("no operation %q", op)
}
