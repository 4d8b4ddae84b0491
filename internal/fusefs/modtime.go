package fusefs

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs"
)

// modTimeCarrier is a File whose next flush can set the file's mtime in
// the log entry that commits its data (client.File.ModTimeAtCommit).
type modTimeCarrier interface {
	ModTimeAtCommit(t time.Time) (pending bool)
}

// ModTimeAtCommit passes t to the client file.
func (f clientFile) ModTimeAtCommit(t time.Time) bool { return f.f.ModTimeAtCommit(t) }

// carrierOf returns the file under f's wrappers (namedFile,
// observedFile) as a modTimeCarrier, if it is one.
func carrierOf(f File) (modTimeCarrier, bool) {
	for {
		switch w := f.(type) {
		case namedFile:
			f = w.File
		case *observedFile:
			f = w.f
		default:
			mc, ok := f.(modTimeCarrier)
			return mc, ok
		}
	}
}

// carryModTime handles a setattr that only sets mtime on a file whose
// data h still buffers: the kernel's write-back cache sends its own mtime
// just before the data, at close or fsync. The time rides on the data's
// commit (one log entry rather than two, a third of a small file's
// metadata syncs), and the file's attributes after it are returned. It
// returns nil when that does not apply, or the closer found that it did
// not (asyncclose.go): the caller then sets the time as any setattr.
func (n *node) carryModTime(ctx context.Context, h *handle, a SetAttr) (*chunkfs.FileInfo, error) {
	if a.MTime == nil || a.ATime != nil || a.TimesNow || a.Size != nil || a.Perm != nil || a.UID != nil || a.GID != nil ||
		h == nil || !h.write || h.w == nil || !h.w.hasDirty() {
		return nil, nil
	}
	mc, ok := carrierOf(h.f)
	if !ok {
		return nil, nil
	}
	for _, w := range n.writers() {
		if w != h.w && w.hasDirty() {
			return nil, nil // its commit could come after ours and set now
		}
	}
	return n.m.closer.carry(ctx, h, mc, *a.MTime)
}

// committed is a file's attributes as the commit of its data through this
// mount left them, at the node's write generation gen.
type committed struct {
	fi  chunkfs.FileInfo
	gen uint64
}

// noteCommitted keeps fi, the attributes of n just after its data's
// commit, for takeCommitted: the close that follows the kernel's mtime
// setattr records that version without asking again.
func (n *node) noteCommitted(fi *chunkfs.FileInfo) {
	n.committed.Store(&committed{fi: *fi, gen: n.generation()})
}

// takeCommitted returns n's attributes as its last commit left them, if
// no write or truncation through this mount came since, or else asks the
// cluster.
func (n *node) takeCommitted(ctx context.Context) (*chunkfs.FileInfo, error) {
	if c := n.committed.Swap(nil); c != nil && c.gen == n.generation() {
		return &c.fi, nil
	}
	return n.m.b.Stat(ctx, chunkfs.Root, n.path())
}
