package master

import (
	"context"
	"path"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// sharedCut returns the chunk a truncation command would cut in its
// middle when a snapshot shares it.
func (m *Master) sharedCut(cmd *namespace.Command) (namespace.Chunk, bool) {
	if cmd == nil || cmd.Set&namespace.SetLength == 0 {
		return namespace.Chunk{}, false
	}
	size := m.chunkSize()
	if cmd.Set&namespace.SetLength == 0 || size == 0 || cmd.Length < 0 || cmd.Length%size == 0 {
		return namespace.Chunk{}, false
	}
	ch, fi, ok, err := m.lookupChunk(cmd.Caller, cmd.Path, cmd.Length/size)
	if err != nil || !ok || !ch.Shared || cmd.Length > fi.Length {
		return namespace.Chunk{}, false
	}
	return ch, true
}

// mutate logs a namespace mutation of a client request and finishes it.
func (m *Master) mutate(ctx context.Context, cmd *namespace.Command) (namespace.Result, uint64, error) {
	r, id, err := m.apply(ctx, cmd)
	if err != nil {
		return r, 0, err
	}
	return r, id, m.settle(ctx, cmd, r)
}

// setAttr logs cmd, a setattr, and finishes it. A truncation that cuts
// a chunk a snapshot shares cuts a copy first, and again (maxCopyRounds
// in all) if a snapshot shared it anew before the cut was logged.
func (m *Master) setAttr(ctx context.Context, cmd *namespace.Command) (namespace.Result, uint64, error) {
	for round := 1; ; round++ {
		if ch, ok := m.sharedCut(cmd); ok {
			if _, err := m.copyOnWrite(context.WithoutCancel(ctx), cmd.Caller, cmd.Path, ch); err != nil {
				return namespace.Result{}, 0, err
			}
		}
		r, id, err := m.mutate(ctx, cmd)
		if err != nil && round < maxCopyRounds {
			if _, again := m.sharedCut(cmd); again {
				continue
			}
		}
		return r, id, err
	}
}

// rename logs cmd, a rename, while no snapshot is being taken (see
// Master.snapMu).
func (m *Master) rename(ctx context.Context, cmd *namespace.Command) (namespace.Result, uint64, error) {
	m.snapMu.RLock()
	defer m.snapMu.RUnlock()
	return m.mutate(ctx, cmd)
}

// settle does what a logged mutation leaves to do outside the log: its
// garbage is queued for the chunkservers, a create's first chunk is placed
// (placeFirst), and a chunk a truncation cut in
// its middle is cut on its replicas (with a context the client cannot
// cancel, so that a cut is never left half done).
func (m *Master) settle(ctx context.Context, cmd *namespace.Command, r namespace.Result) error {
	m.collect(r.Garbage)
	if cmd.Op == namespace.OpCreate && r.Allocated {
		m.firsts.add(r.Chunk.Handle)
		m.placeFirst(context.WithoutCancel(ctx), cmd.Path, r)
	}
	if r.Cut != nil {
		return m.cutChunk(context.WithoutCancel(ctx), cmd.Path, *r.Cut)
	}
	return nil
}

// parentAfter returns the attributes of p's parent directory now, as c
// may see them, or nil. A mount that creates or removes an entry answers
// the kernel's next look at the directory (it asks after every create,
// mkdir, symlink and unlink, for its permission check) with them instead
// of a Stat of its own.
func (m *Master) parentAfter(c chunkfs.Caller, p string) *chunkfs.FileInfo {
	var fi chunkfs.FileInfo
	var err error
	m.state.read(func(ns *namespace.Namespace) { fi, err = ns.Stat(c, path.Dir(p)) })
	if err != nil {
		return nil
	}
	return &fi
}
