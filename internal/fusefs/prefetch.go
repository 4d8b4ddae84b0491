package fusefs

import (
	"context"
	"path"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// Look-ups a burst of them asks of one directory are answered from one
// listing of it (stat-prefetch for look-ups, as READDIRPLUS does for `ls
// -l`): after lookupBurst misses of the kernel's caches in a directory,
// the next look-up lists the directory, with every entry's attributes, in
// one call, and look-ups of the names it holds are answered from it for
// Config.PrefetchTimeout (by default 1 s, as long as the kernel itself
// trusts an entry). A walk over a directory whose kernel
// entries have expired (`find`, `rsync`, mdtest's stat phase) then costs
// a call per listing instead of one per name.
//
// What it costs in consistency is what md-cache costs: another mount's
// change shows up in a look-up up to that timeout later (the kernel's
// entry and attribute timeouts say the same of names it has seen). This mount's
// own changes drop every listing before they reach the cluster (any call
// made with mount.mutation, every write and every release of a written or
// hidden file), and a listing fetched while a change was made is not
// kept; a remove or setattr of a non-directory with one name drops only
// what the listings hold of it and of its directory (forget), before
// and after, so that removing a directory's files one by one keeps the
// listing that answers the look-ups of the rest. Names a listing lacks are asked of the master (a negative answer
// is cached only as NegativeTimeout says, by the kernel). Opens always
// ask the cluster (close-to-open). A listing answers only the caller it
// was made for, who may read the directory: another caller's look-ups
// ask the master with their own rights.

// lookupBurst is how many look-up misses in a directory fetch its
// listing; after a listing of n entries has expired, it takes
// max(lookupBurst, n/16) more, so that a few look-ups in a huge directory
// do not list it again and again.
const lookupBurst = 8

// maxListed bounds the entries all listings hold together.
const maxListed = 256 << 10

// listings owns the mount's directory listings kept for look-ups. A nil
// *listings keeps none.
type listings struct {
	clk clock.Clock
	ttl time.Duration // how long a listing answers; 0: never

	mu    sync.Mutex // guards the fields below
	gen   uint64     // bumped by every change made through the mount
	dirs  map[listKey]*listing
	total int // entries held by every listing
}

// listKey names a listing: a directory as one caller sees it.
type listKey struct{ caller, dir string }

// listing is one directory's entries, or the misses counted towards
// fetching them.
type listing struct {
	gen      uint64 // the generation the misses and entries belong to
	misses   int
	need     int // misses that fetch the listing
	fetching bool
	fetched  time.Time
	byName   map[string]*chunkfs.FileInfo // nil until fetched
}

func newListings(clk clock.Clock, ttl time.Duration) *listings {
	return &listings{clk: clk, ttl: ttl, dirs: map[listKey]*listing{}}
}

// changed drops every listing: the mount is about to change the cluster.
func (l *listings) changed() {
	if l == nil || l.ttl == 0 {
		return
	}
	l.mu.Lock()
	l.gen++
	if len(l.dirs) > 0 {
		l.dirs, l.total = map[listKey]*listing{}, 0
	}
	l.mu.Unlock()
}

// forget drops what the listings hold of path p and of its directory
// (in the listing of the directory above): a change of p alone, its
// attributes or its removal, is about to reach the cluster, or has; the
// caller calls it both times. The other entries stay, and a listing
// being fetched meanwhile is not kept.
func (l *listings) forget(p string) {
	if l == nil || l.ttl == 0 {
		return
	}
	dir := path.Dir(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	for k, d := range l.dirs {
		if d.fetching {
			continue // a fetch of the generation before: not kept (store)
		}
		d.gen = l.gen // the misses counted, or the entries, stand
		if d.byName == nil {
			continue
		}
		for _, q := range []string{p, dir} {
			if k.dir == path.Dir(q) && d.byName[path.Base(q)] != nil {
				delete(d.byName, path.Base(q))
				l.total--
			}
		}
	}
}

// find returns the entry called name of the listing of k while it is
// fresh (ok: the listing holds name); otherwise it counts a miss and
// says whether this look-up should fetch the listing (fetch, with the
// generation to store it under).
func (l *listings) find(k listKey, name string) (fi *chunkfs.FileInfo, ok, fetch bool, gen uint64) {
	if l == nil || l.ttl == 0 {
		return nil, false, false, 0
	}
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dirs[k]
	if d != nil && d.byName != nil && now.Before(d.fetched.Add(l.ttl)) {
		if e, ok := d.byName[name]; ok {
			c := *e
			return &c, true, false, 0
		}
		return nil, false, false, 0
	}
	if d == nil || d.gen != l.gen {
		d = &listing{gen: l.gen, need: lookupBurst}
		l.dirs[k] = d
	}
	if d.byName != nil { // expired
		l.total -= len(d.byName)
		d.need = max(lookupBurst, len(d.byName)/16)
		d.byName, d.misses = nil, 0
	}
	d.misses++
	if d.misses < d.need || d.fetching {
		return nil, false, false, 0
	}
	d.fetching = true
	return nil, false, true, l.gen
}

// store keeps a listing of k fetched under generation gen, unless the
// mount changed something meanwhile; entries nil (the fetch failed)
// just ends the fetch, and the misses count again.
func (l *listings) store(k listKey, gen uint64, entries []*chunkfs.FileInfo) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dirs[k]
	if d == nil || d.gen != gen || l.gen != gen {
		return
	}
	d.fetching, d.misses = false, 0
	if entries == nil || len(entries) > maxListed {
		d.need = min(2*d.need, 1024) // a directory this caller may not list, or a huge one
		return
	}
	if l.total+len(entries) > maxListed {
		l.dirs, l.total = map[listKey]*listing{k: d}, 0
	}
	d.byName = make(map[string]*chunkfs.FileInfo, len(entries))
	for _, e := range entries {
		d.byName[e.FileName] = e
	}
	d.fetched = now
	l.total += len(entries)
}

// listedLookup answers a look-up of name in n from a listing, fetching
// the listing when a burst of misses calls for it; false: ask the master.
func (n *node) listedLookup(ctx context.Context, name string) (*chunkfs.FileInfo, bool) {
	l := n.m.lists
	caller := callerOf(ctx)
	k := listKey{caller: callerKey(caller), dir: n.path()}
	fi, ok, fetch, gen := l.find(k, name)
	if ok || !fetch {
		return fi, ok
	}
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	entries, err := n.m.b.ReadDir(cctx, caller, k.dir)
	if err != nil {
		entries = nil
	} else if entries == nil {
		entries = []*chunkfs.FileInfo{}
	}
	l.store(k, gen, entries)
	fi, ok, _, _ = l.find(k, name)
	return fi, ok
}
