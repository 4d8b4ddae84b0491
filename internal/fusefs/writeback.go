package fusefs

import (
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// With the kernel's write-back cache (Config.WritebackCache) the kernel
// buffers writes in its page cache and trusts its own size and mtime of a
// cached regular file: attributes the mount answers later do not change
// them (fuse_change_attributes keeps i_size while writeback_cache is on).
// A file another mount rewrote would then be read at its old size from
// stale pages. Close-to-open is kept by naming each version of a file by a
// new FUSE generation, hence a new nodeid and a new kernel inode:
//
//   - the mount remembers, per inode number, the generation the kernel
//     should use and the version (size, mtime) that generation's kernel
//     inode caches;
//   - a lookup that finds the file changed on the cluster, while no
//     descriptor of this mount has it open, answers a new generation: the
//     kernel drops the old dentry and makes a fresh inode with the
//     cluster's size and no pages;
//   - an open that finds the file changed fails with ESTALE; the kernel
//     retries the open once with LOOKUP_REVAL (do_filp_open), whose
//     lookup gets the new generation. The open on that fresh inode is
//     accepted as it is: its size was read after the first attempt began.
//
// While a descriptor of this mount has the file open for writing, opens
// share its inode: the kernel's pages may hold writes not yet pushed, and
// local semantics between descriptors of one mount come first. Readers
// alone hold nothing to push: a changed file gets a new generation though
// they keep the old one (the kernel sends a closed descriptor's release
// after close(2) returns, so an open right after a close may still find
// the closed reader counted). After a close
// that pushed writes, the mount records the cluster's version as the one
// the kernel caches, so its own writes do not make it drop its cache.

// fileState is what the mount knows of one regular file's kernel inode.
type fileState struct {
	gen   uint64  // generation the kernel should use
	known version // version the inode of gen caches
	open  int     // open handles of this mount on any generation
	// writers counts those of them open for writing.
	writers int
	// stale is set by an open that found the file changed: the next
	// lookup starts a new generation.
	stale bool
	// estaleGen is the generation an open refused with ESTALE, until
	// estaleUntil: the first open of a newer generation in that time is
	// the kernel's retry, whose lookup came after the refusal, and is
	// accepted whatever the version (a second ESTALE would fail the open).
	estaleGen   uint64
	estaleUntil time.Time
}

// retryWindow bounds how long after an ESTALE an open of a newer
// generation is taken for the kernel's retry.
const retryWindow = 2 * time.Second

// files is the per-inode state of one mount.
type files struct {
	clk     clock.Clock // times the retry window
	mu      sync.Mutex  // guards byIno, nextGen and every fileState
	byIno   map[uint64]*fileState
	nextGen uint64
}

func newFiles(clk clock.Clock) *files {
	return &files{clk: clk, byIno: map[uint64]*fileState{}, nextGen: 1}
}

// lookedUp returns the generation the kernel should use for fi, starting a
// new one when the file changed and this mount does not have it open for
// writing.
func (t *files) lookedUp(fi *chunkfs.FileInfo) uint64 {
	v := versionOf(fi)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byIno[fi.Inode]
	switch {
	case s == nil:
		s = &fileState{gen: t.nextGen, known: v}
		t.nextGen++
		t.byIno[fi.Inode] = s
	case s.writers == 0 && (s.stale || s.known != v):
		s.gen, s.known, s.stale = t.nextGen, v, false
		t.nextGen++
	}
	return s.gen
}

// opened decides an open (for writing: write) of generation gen of inode
// ino, whose cluster version is v. It returns stale when the kernel must
// look the file up again (the open then fails with ESTALE), and otherwise
// whether the kernel's pages may be kept; it counts the open.
func (t *files) opened(ino, gen uint64, v version, write bool) (keep, stale bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byIno[ino]
	if s == nil {
		// Forgotten while the kernel still used it (go-fuse may report a
		// forget early): nothing is known of its pages.
		s = &fileState{gen: gen}
		t.byIno[ino] = s
	}
	count := func() {
		s.open++
		if write {
			s.writers++
		}
	}
	if s.writers > 0 {
		count()
		return true, false // share the inode and its pages
	}
	now := t.clk.Now()
	if gen != s.gen || s.known != v {
		if gen == s.gen && s.estaleGen != 0 && s.estaleGen != gen && now.Before(s.estaleUntil) {
			// The kernel's retry: this inode was made by a lookup that
			// started after the first attempt.
			s.estaleGen = 0
			count()
			return s.known == v, false
		}
		s.stale, s.estaleGen, s.estaleUntil = true, gen, now.Add(retryWindow)
		return false, true
	}
	s.estaleGen = 0
	count()
	return true, false
}

// closed uncounts an open (for writing: write) of inode ino.
func (t *files) closed(ino uint64, write bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byIno[ino]; s != nil && s.open > 0 {
		s.open--
		if write && s.writers > 0 {
			s.writers--
		}
	}
}

// wrote records v, read from the cluster after this mount pushed the
// writes of generation gen, as the version its kernel inode caches.
func (t *files) wrote(ino, gen uint64, v version) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byIno[ino]; s != nil && s.gen == gen {
		s.known = v
	}
}

// forgot drops the state of inode ino when the kernel forgot generation
// gen and nothing of the mount has the file open.
func (t *files) forgot(ino, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The kernel forgets the generation a retry's first lookup returned
	// (its nodeid differed from the dentry's); the retry must still be
	// recognised.
	if s := t.byIno[ino]; s != nil && s.gen == gen && s.open == 0 && (s.estaleGen == 0 || t.clk.Now().After(s.estaleUntil)) {
		delete(t.byIno, ino)
	}
}

// retimed records that this mount changed only the times of generation
// gen, from version before to after: if its kernel inode held before, it
// holds after (the kernel keeps its own mtime anyway).
func (t *files) retimed(ino, gen uint64, before, after version) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byIno[ino]; s != nil && s.gen == gen && s.known == before {
		s.known = after
	}
}
