package oplog

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/chunkfs/chunkfs"
)

// Group commit. Raft already writes every queued entry in one fsync, but
// the BoltDB log store spends ~20 µs of CPU per entry; so Apply also packs
// concurrent commands into one Raft entry. A batch is a format byte, a
// count, and each command with its length. Up to maxInFlight batches are
// in Raft at once; while they are, new commands queue up and form the next
// batch.

const (
	batchFormat     = 1
	maxBatchCount   = 4096
	maxBatchBytes   = 4 << 20
	maxInFlight     = 2
	pendingCapacity = 4096
)

// request is one command waiting to be logged.
type request struct {
	cmd  []byte
	done chan response // buffered by one
}

type response struct {
	result any
	index  uint64
	err    error
}

// submit queues cmd and waits for its result.
func (l *Log) submit(ctx context.Context, cmd []byte) (any, uint64, error) {
	req := request{cmd: cmd, done: make(chan response, 1)}
	select {
	case l.pending <- req:
	case <-l.stop:
		return nil, 0, errClosed
	case <-ctx.Done():
		return nil, 0, &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	select {
	case r := <-req.done:
		return r.result, r.index, r.err
	case <-l.closed:
		// Close answers every request it took; one still queued is lost.
		select {
		case r := <-req.done:
			return r.result, r.index, r.err
		default:
			return nil, 0, errClosed
		}
	case <-ctx.Done():
		return nil, 0, &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: errors.New("outcome unknown: " + ctx.Err().Error())}
	}
}

var errClosed = &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: errors.New("log closed")}

// batchLoop forms batches from pending requests and logs them.
func (l *Log) batchLoop() {
	defer close(l.loopDone)
	slots := make(chan struct{}, maxInFlight)
	for {
		select {
		case slots <- struct{}{}:
		case <-l.stop:
			return
		}
		var first request
		select {
		case first = <-l.pending:
		case <-l.stop:
			return
		}
		batch := l.drain(first)
		l.inflight.Add(1)
		go func() {
			defer l.inflight.Done()
			l.commit(batch)
			<-slots
		}()
	}
}

// drain collects first and whatever else is queued, within the batch limits.
func (l *Log) drain(first request) []request {
	batch, size := []request{first}, len(first.cmd)
	for len(batch) < maxBatchCount && size < maxBatchBytes {
		select {
		case r := <-l.pending:
			batch = append(batch, r)
			size += len(r.cmd)
		default:
			return batch
		}
	}
	return batch
}

// commit logs one batch and answers each of its requests.
func (l *Log) commit(batch []request) {
	f := l.raft.Apply(encodeBatch(batch), l.cfg.ApplyTimeout)
	err := f.Error()
	var results []any
	if err == nil {
		results, _ = f.Response().([]any)
	}
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- response{err: translate(err)}
		case i < len(results):
			r.done <- response{result: results[i], index: f.Index()}
		default:
			r.done <- response{err: &chunkfs.Error{Op: "log", Kind: chunkfs.KindOther, Err: errors.New("batch result missing")}}
		}
	}
}

func encodeBatch(batch []request) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, r := range batch {
		size += binary.MaxVarintLen64 + len(r.cmd)
	}
	b := make([]byte, 0, size)
	b = append(b, batchFormat)
	b = binary.AppendUvarint(b, uint64(len(batch)))
	for _, r := range batch {
		b = binary.AppendUvarint(b, uint64(len(r.cmd)))
		b = append(b, r.cmd...)
	}
	return b
}

// decodeBatch splits a logged batch into its commands.
func decodeBatch(b []byte) ([][]byte, error) {
	if len(b) == 0 || b[0] != batchFormat {
		return nil, errors.New("oplog: unknown entry format")
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxBatchCount {
		return nil, errors.New("oplog: bad batch count")
	}
	b = b[k:]
	cmds := make([][]byte, 0, n)
	for range n {
		m, k := binary.Uvarint(b)
		if k <= 0 || m > uint64(len(b)-k) {
			return nil, errors.New("oplog: truncated batch")
		}
		cmds = append(cmds, b[k:k+int(m)])
		b = b[k+int(m):]
	}
	if len(b) != 0 {
		return nil, errors.New("oplog: trailing bytes in batch")
	}
	return cmds, nil
}
