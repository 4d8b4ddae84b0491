package fusefs

import (
	"context"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
)

// A look-up of a name missing from a directory whose every name this
// mount knows is answered ENOENT by the mount, without asking the master:
// the look-up the kernel makes before each create(2) of a new name then
// costs no round trip. The mount knows a directory's names for
// Config.NegativeTimeout (the time the kernel itself trusts a missing
// name; 0, the default, turns this off) from when it made the directory
// (mkdir: empty) or listed its names, together with the names it has
// made in it since (create, mkdir, symlink, link, mknod). A name removed
// stays known (its look-up asks the master); a change that moves names
// through the mount (a rename, or an unlink that hides an open file)
// drops everything known.
//
// What it costs in consistency is what --negative-timeout costs: a name
// another mount makes shows up here up to that timeout later, as a name
// the kernel has looked up and found missing does. A create(2) of such a
// name is sent to the master, which refuses an exclusive one (EEXIST; the
// async create's EIO at close) and opens the other mount's file for a
// plain one, as in any race between two mounts.
//
// A directory not made by the mount is listed after lookupBurst misses
// in it (as stat-prefetch counts them), and again after the same burst
// once its names expire; the listing takes the names of this mount's
// creates in flight too (creator.listNames), so a create the master has
// not yet applied is not missed.

// knownDirs owns the directories whose every name the mount knows. A nil
// *knownDirs knows none.
type knownDirs struct {
	clk clock.Clock
	ttl time.Duration // how long a directory's names are known; 0: never

	mu   sync.Mutex // guards gen and dirs
	gen  uint64     // bumped by every change that drops what is known
	dirs map[string]*knownDir
}

// knownDir is one directory's names, or the misses counted towards
// listing them.
type knownDir struct {
	gen      uint64 // the generation the misses and names belong to
	misses   int
	need     int // misses that list the directory
	fetching bool
	added    []string // names created while the listing is fetched
	since    time.Time
	names    map[string]struct{} // nil until known
}

func newKnownDirs(clk clock.Clock, ttl time.Duration) *knownDirs {
	return &knownDirs{clk: clk, ttl: ttl, dirs: map[string]*knownDir{}}
}

func (k *knownDirs) off() bool { return k == nil || k.ttl <= 0 }

// changed forgets every directory: the mount is about to change names
// other than by creating one.
func (k *knownDirs) changed() {
	if k.off() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	if len(k.dirs) > 0 {
		k.dirs = map[string]*knownDir{}
	}
}

// adding records that the mount is about to create name in dir, before
// the master may have it.
func (k *knownDirs) adding(dir, name string) {
	if k.off() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.dirs[dir]
	switch {
	case d == nil || d.gen != k.gen:
	case d.names != nil:
		d.names[name] = struct{}{}
	case d.fetching:
		d.added = append(d.added, name)
	}
}

// made records dir as made by the mount just now: empty.
func (k *knownDirs) made(dir string) {
	if k.off() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dirs[dir] = &knownDir{gen: k.gen, need: lookupBurst, since: k.clk.Now(), names: map[string]struct{}{}}
}

// find reports whether name is known missing from dir; otherwise it
// counts a miss and says whether this look-up should list the directory
// (fetch, with the generation to store its names under).
func (k *knownDirs) find(dir, name string) (missing, fetch bool, gen uint64) {
	if k.off() {
		return false, false, 0
	}
	now := k.clk.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if d := k.freshLocked(dir, now); d != nil {
		_, ok := d.names[name]
		return !ok, false, 0
	}
	d := k.dirs[dir]
	if d == nil || d.gen != k.gen {
		d = &knownDir{gen: k.gen, need: lookupBurst}
		k.dirs[dir] = d
	}
	if d.names != nil { // expired
		d.need = max(lookupBurst, len(d.names)/16)
		d.names, d.misses = nil, 0
	}
	d.misses++
	if d.misses < d.need || d.fetching {
		return false, false, 0
	}
	d.fetching, d.added = true, nil
	return false, true, k.gen
}

// store keeps dir's names listed at since under generation gen, with the
// names created meanwhile, unless something else changed; names nil (the
// listing failed or was too long) ends the fetch, and takes twice the
// misses to try again.
func (k *knownDirs) store(dir string, gen uint64, since time.Time, names []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.dirs[dir]
	if d == nil || d.gen != gen || k.gen != gen || !d.fetching {
		return
	}
	d.fetching, d.misses = false, 0
	if names == nil {
		d.need = min(2*d.need, 1024)
		return
	}
	d.names = make(map[string]struct{}, len(names)+len(d.added))
	for _, n := range append(names, d.added...) {
		d.names[n] = struct{}{}
	}
	d.since, d.added = since, nil
}

// knownMissing reports whether name is known missing from n, listing n
// when a burst of misses calls for it.
func (n *node) knownMissing(ctx context.Context, name string) bool {
	k := n.m.known
	dir := n.path()
	missing, fetch, gen := k.find(dir, name)
	if !fetch {
		return missing
	}
	since := k.clk.Now() // the names are known from before the listing
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	names, err := n.m.creates.listNames(cctx, callerOf(ctx), dir)
	if err != nil || len(names) > maxListed {
		names = nil
	} else if names == nil {
		names = []string{}
	}
	k.store(dir, gen, since, names)
	return k.missing(dir, name)
}

// missing reports whether name is known missing from dir, counting no
// miss.
func (k *knownDirs) missing(dir, name string) bool {
	if k.off() {
		return false
	}
	now := k.clk.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.freshLocked(dir, now)
	if d == nil {
		return false
	}
	_, ok := d.names[name]
	return !ok
}

// freshLocked returns dir's record if it holds names known at now.
func (k *knownDirs) freshLocked(dir string, now time.Time) *knownDir {
	d := k.dirs[dir]
	if d == nil || d.gen != k.gen || d.names == nil || !now.Before(d.since.Add(k.ttl)) {
		return nil
	}
	return d
}
