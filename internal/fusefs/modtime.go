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
// whenever it writes pages back, and just before the data at close or
// fsync. The time rides on the data's next commit (one log entry rather
// than two, a third of a small file's metadata syncs; and no push of
// what is buffered), and the file's attributes as they will be after it
// are returned. It returns nil when that does not apply: the caller then
// sets the time as any setattr.
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
	return carryAtPush(ctx, h, mc, *a.MTime)
}

// carryAtPush leaves t to the next push of h's data, and answers the
// file's attributes as they will be after it, without asking the
// cluster: those last answered to the kernel, with the writes' end
// (Setattr adds it) and t. Another mount's change since shows after
// AttrTimeout, as any.
func carryAtPush(ctx context.Context, h *handle, mc modTimeCarrier, t time.Time) (*chunkfs.FileInfo, error) {
	n := h.n
	fi := n.lastSeen()
	if fi == nil {
		var err error
		if fi, err = n.m.b.Stat(ctx, chunkfs.Root, n.path()); err != nil {
			return nil, err
		}
	}
	mc.ModTimeAtCommit(t)
	fi.MTime = t
	if fi.CTime.Before(t) {
		fi.CTime = t
	}
	return fi, nil
}
