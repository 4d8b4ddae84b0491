package namespace

import (
	"io"
	"slices"
	"sync"
)

// A checkpoint is written from a frozen view of the namespace while Apply
// goes on (Freeze). The view costs nothing up front: from the freeze on,
// Apply calls touch before it changes an inode that existed at the
// freeze, and touch keeps a copy of the inode as it was (its before
// image) the first time. The writer, visiting an inode, takes its image if
// there is one and otherwise copies the live inode, which no apply has
// changed since the freeze; the two meet under one mutex, so each sees the
// other's work in order. Inodes made after the freeze are not reachable
// from the frozen tree (the directory that gained them has an image) and
// are never copied.
//
// *Rejected:* a persistent (path-copying) tree, which costs every apply
// allocations and the heap a pointer per inode even with no checkpoint
// running; holding the read lock while writing (the stall this removes);
// a deep copy at the freeze (as slow as the write it replaces).

// cowState is the bookkeeping of a checkpoint in flight.
type cowState struct {
	mu     sync.Mutex        // guards images and done
	images map[*inode]*inode // inodes as they were at the freeze, once changed
	done   bool              // the writer finished: no more images are needed
	// nextInode is the counter at the freeze: inodes numbered from it on
	// are younger than the view.
	nextInode uint64
}

// touch keeps n's before image if a checkpoint is being written and n
// is older than its freeze. Every change to an inode's fields, chunk
// list, directory entries or extended attributes calls it first.
func (ns *Namespace) touch(n *inode) {
	cs := ns.cow
	if cs == nil || n.ino() >= cs.nextInode {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.done {
		ns.cow = nil // only the applying goroutine reads or writes ns.cow
		return
	}
	if cs.images[n] == nil {
		cs.images[n] = copyInode(n)
	}
}

// view returns n as it was at the freeze: its image, or a copy of the
// live inode (taken under the mutex, so no apply changes it meanwhile);
// nil once the view has ended. A non-directory is copied into scratch,
// which the next call reuses: the writer is done with a file before it
// visits the next inode, and only directories are held across the visit
// of their entries.
func (cs *cowState) view(n, scratch *inode) *inode {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch img := cs.images[n]; {
	case cs.done:
		return nil
	case img != nil:
		return img
	case n.isDir() || n.ext() != nil:
		return copyInode(n)
	}
	buf := scratch.chunks()
	*scratch = *n
	scratch.setChunks(append(buf[:0], n.chunks()...))
	return scratch
}

// copyInode copies n deeply enough that no later change to n shows in
// the copy: its chunk list, its entries (blocks change in place) and its
// attribute list. Entries still point at the live children.
func copyInode(n *inode) *inode {
	c := *n
	if n.ext() != nil {
		e := *n.ext()
		e.kids.blocks = make([]block, len(n.ext().kids.blocks))
		for i, b := range n.ext().kids.blocks {
			// The names are shared: their bytes are never written over.
			e.kids.blocks[i] = block{ents: slices.Clone(b.ents), names: b.names, dead: b.dead}
		}
		e.xattrs = slices.Clone(n.ext().xattrs)
		c.setExt(&e)
	}
	c.setChunks(cloneChunks(n.chunks()))
	return &c
}

// Frozen is the namespace as it was when Freeze was called, which
// Write writes as a checkpoint while the namespace goes on changing.
type Frozen struct {
	ns       *Namespace
	cs       *cowState
	header   Namespace       // the counters and the safe mode hold at the freeze
	draining []string        // copied at the freeze
	trash    []trashEntry    // copied at the freeze
	paths    []byte          // the trash's paths: bytes below its length are never written over
	held     []HeldBackChunk // copied at the freeze
	period   int64
	nextID   uint64
	once     sync.Once
}

// Freeze starts a checkpoint of the state as it is now. The caller holds
// off Apply (and any other Freeze) for the call alone; Write may then
// run concurrently with Apply, and Close must follow it (Write closes).
// At most one checkpoint is in flight: a Freeze while another is open
// ends the older one's view.
func (ns *Namespace) Freeze() *Frozen {
	if ns.cow != nil {
		ns.cow.mu.Lock()
		ns.cow.done = true
		ns.cow.mu.Unlock()
	}
	cs := &cowState{images: map[*inode]*inode{}, nextInode: ns.nextInode}
	ns.cow = cs
	f := &Frozen{ns: ns, cs: cs, draining: slices.Clone(ns.draining), trash: slices.Clone(ns.trash.entries),
		paths:  ns.trash.paths,
		period: ns.trash.period, nextID: ns.trash.nextID, held: ns.HeldBackAll()}
	f.header = Namespace{root: ns.root, nextInode: ns.nextInode, nextHandle: ns.nextHandle, chunkSize: ns.chunkSize,
		defaultRepl: ns.defaultRepl, leaseHorizon: ns.leaseHorizon, safe: ns.safe, clusterID: ns.clusterID}
	return f
}

// Write writes the frozen state in the current checkpoint format and
// closes f.
func (f *Frozen) Write(w io.Writer) error {
	defer f.Close()
	return f.write(w, snapshotVersion)
}

// Close ends the view: applies stop keeping images. It may be called more
// than once, from any goroutine.
func (f *Frozen) Close() {
	f.once.Do(func() {
		f.cs.mu.Lock()
		f.cs.done = true
		f.cs.images = nil
		f.cs.mu.Unlock()
	})
}
