package oplog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/chunkfs/chunkfs"
	"github.com/hashicorp/raft"
)

// Group commit. Raft already writes every queued entry in one fsync, but
// Raft and the log store spend CPU per entry; so Apply also packs
// concurrent commands into one Raft entry. A batch is a format byte, a
// count, and each command with its length. Up to maxInFlight batches are
// in Raft at once; while they are, new commands queue up and form the next
// batch.

// MaxEntryCommands and MaxEntryBytes bound one Raft entry; ApplyAll
// refuses more.
const (
	MaxEntryCommands = 4096
	MaxEntryBytes    = 4 << 20
)

// Entry formats: 1 is the commands alone; 2 ends with a CRC32C of all
// before it, since the log store checksums no entry's contents.
const (
	batchFormat1 = 1
	batchFormat  = 2
	maxInFlight  = 2
	// pendingCapacity is how many requests wait for a batch at most. The
	// queue holds pointers: its buffer is allocated whole when the log
	// opens and kept, 32 KiB of pointers where 4,096 requests by value
	// took 160 KiB of the master's heap at rest.
	pendingCapacity = 4096
)

// request is one or more commands waiting to be logged together.
type request struct {
	cmds [][]byte
	size int           // bytes of cmds
	done chan response // buffered by one
}

type response struct {
	results []any // one per command of the request
	index   uint64
	err     error
}

// submit queues cmds (all in one Raft entry) and waits for their results.
func (l *Log) submit(ctx context.Context, cmds [][]byte) ([]any, uint64, error) {
	req := &request{cmds: cmds, done: make(chan response, 1)}
	for _, c := range cmds {
		req.size += len(c)
	}
	if len(cmds) == 0 {
		return nil, 0, &chunkfs.Error{Op: "log", Kind: chunkfs.KindInvalid, Err: errors.New("no commands")}
	}
	if len(cmds) > MaxEntryCommands || req.size > MaxEntryBytes {
		return nil, 0, &chunkfs.Error{Op: "log", Kind: chunkfs.KindTooLarge, Err: fmt.Errorf("%d commands of %d bytes do not fit one log entry", len(cmds), req.size)}
	}
	select {
	case l.pending <- req:
	case <-l.stop:
		return nil, 0, errClosed
	case <-ctx.Done():
		return nil, 0, &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	select {
	case r := <-req.done:
		return r.results, r.index, r.err
	case <-l.closed:
		// Close answers every request it took; one still queued is lost.
		select {
		case r := <-req.done:
			return r.results, r.index, r.err
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
	var carry *request // taken from pending but did not fit the last batch
	defer func() {
		if carry != nil {
			carry.done <- response{err: errClosed}
		}
	}()
	for {
		select {
		case slots <- struct{}{}:
		case <-l.stop:
			return
		}
		var first request
		if carry != nil {
			first, carry = *carry, nil
		} else {
			select {
			case r := <-l.pending:
				first = *r
			case <-l.stop:
				return
			}
		}
		var batch []request
		batch, carry = l.drain(first)
		l.inflight.Add(1)
		go func() {
			defer l.inflight.Done()
			l.commit(batch)
			<-slots
		}()
	}
}

// drain collects first and whatever else is queued, within the batch
// limits; a request that does not fit is returned to start the next batch.
func (l *Log) drain(first request) ([]request, *request) {
	batch, count, size := []request{first}, len(first.cmds), first.size
	for count < MaxEntryCommands && size < MaxEntryBytes {
		select {
		case r := <-l.pending:
			if count+len(r.cmds) > MaxEntryCommands || size+r.size > MaxEntryBytes {
				return batch, r
			}
			batch = append(batch, *r)
			count += len(r.cmds)
			size += r.size
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// errOutcomeUnknown answers the requests of a batch whose leader was
// deposed while committing it: a new leader may have committed the entry
// or not. Redirecting them as "not the leader" would run them twice (an
// exclusive create answered "exists", a RENAME_EXCHANGE undone), so the
// caller is told the outcome is unknown, as for a call cut off by its
// deadline.
var errOutcomeUnknown = &chunkfs.Error{Op: "log", Kind: chunkfs.KindUnavailable, Err: errors.New("outcome unknown: leadership lost while committing")}

// commit logs one batch and answers each of its requests.
func (l *Log) commit(batch []request) {
	f := l.raft.Apply(encodeBatch(batch), l.cfg.ApplyTimeout)
	err := f.Error()
	var results []any
	if err == nil {
		results, _ = f.Response().([]any)
	}
	off := 0
	for _, r := range batch {
		n := len(r.cmds)
		switch {
		case errors.Is(err, raft.ErrLeadershipLost):
			r.done <- response{err: errOutcomeUnknown}
		case err != nil:
			r.done <- response{err: l.translate(err)}
		case off+n <= len(results):
			r.done <- response{results: results[off : off+n : off+n], index: f.Index()}
		default:
			r.done <- response{err: &chunkfs.Error{Op: "log", Kind: chunkfs.KindOther, Err: errors.New("batch result missing")}}
		}
		off += n
	}
}

func encodeBatch(batch []request) []byte {
	size, count := 1+binary.MaxVarintLen64+4, 0
	for _, r := range batch {
		size += len(r.cmds)*binary.MaxVarintLen64 + r.size
		count += len(r.cmds)
	}
	b := make([]byte, 0, size)
	b = append(b, batchFormat)
	b = binary.AppendUvarint(b, uint64(count))
	for _, r := range batch {
		for _, c := range r.cmds {
			b = binary.AppendUvarint(b, uint64(len(c)))
			b = append(b, c...)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// decodeBatch splits a logged batch into its commands.
func decodeBatch(b []byte) ([][]byte, error) {
	switch {
	case len(b) == 0 || b[0] != batchFormat1 && b[0] != batchFormat:
		return nil, errors.New("oplog: unknown entry format")
	case b[0] == batchFormat:
		if len(b) < 5 || binary.BigEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], crcTable) {
			return nil, errors.New("oplog: entry checksum mismatch")
		}
		b = b[:len(b)-4]
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxEntryCommands {
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
