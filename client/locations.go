package client

import (
	"context"
	"hash/fnv"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
)

// chunkLoc is where one chunk lives, replicas ordered nearest first.
type chunkLoc struct {
	index     int64
	handle    chunkfs.Handle
	version   chunkfs.Version
	replicas  []string
	primary   string
	leaseLeft time.Duration // lease time remaining when the master answered
	token     []byte        // chunk access token the master signed with the location; nil on an insecure cluster
	trusted   time.Time     // writes: the client trusts the lease until then (prepareCached)
}

// fileLocs is what the cache knows about one file.
type fileLocs struct {
	length  int64
	lenTime time.Time // when length was learned
	// inode, mtime and ctime are the file's as the master answered the
	// last look-up: an open that finds others (the file replaced, or
	// written or truncated by another client) drops the entry (validate).
	// The ctime is the master's, stamped on every change: a kernel's
	// mtime, of coarse granularity, may be the same across two versions.
	inode        uint64
	mtime, ctime int64

	chunks  map[int64]*chunkLoc // nil value: a known hole
	expires map[int64]time.Time
}

// maxCachedFiles bounds the cache; past it, an arbitrary file is evicted.
const maxCachedFiles = 4096

// locationCache caches chunk locations per file, with expiry. Look-ups ask
// the master for batch consecutive chunks at once. Callers drop a file's
// entries when using them fails.
type locationCache struct {
	c     *Client
	ttl   time.Duration
	batch int

	mu    sync.Mutex // guards files
	files map[string]*fileLocs
}

func newLocationCache(c *Client, ttl time.Duration, batch int) *locationCache {
	return &locationCache{c: c, ttl: ttl, batch: batch, files: make(map[string]*fileLocs)}
}

// lookup returns chunk index of path (nil for a hole or a chunk past the
// end) and the file length, from the cache unless fresh is set or the entry
// expired.
func (lc *locationCache) lookup(ctx context.Context, path string, index int64, fresh bool) (*chunkLoc, int64, error) {
	if !fresh {
		if loc, length, ok := lc.cached(path, index); ok {
			return loc, length, nil
		}
	}
	if err := lc.fetch(ctx, path, index); err != nil {
		return nil, 0, err
	}
	loc, length, _ := lc.cached(path, index)
	return loc, length, nil
}

func (lc *locationCache) cached(path string, index int64) (*chunkLoc, int64, bool) {
	now := lc.c.clock.Now()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	fl := lc.files[path]
	if fl == nil {
		return nil, 0, false
	}
	exp, ok := fl.expires[index]
	if !ok || now.After(exp) {
		return nil, 0, false
	}
	return fl.chunks[index], fl.length, true
}

// fetch asks the master for the batch of chunks starting at index.
func (lc *locationCache) fetch(ctx context.Context, path string, index int64) error {
	page, err := lc.c.getChunksCall(ctx, path, index, lc.batch)
	if err != nil {
		return wrapOp("lookup", path, err)
	}
	lc.store(path, index, page.file, page.chunks)
	return nil
}

// validate drops what the cache holds of path unless it was learned of the
// file fi describes, as it is now: same inode, mtime and ctime. Chunks another
// client wrote or truncated away would otherwise be read at their cached
// handles — a truncated file's old chunk, still on its chunkservers until
// they collect it, served for the new one — so an open, which learns the
// file's attributes from the master, is where close-to-open is kept.
func (lc *locationCache) validate(path string, fi *chunkfs.FileInfo) {
	if lc == nil {
		return // a client that caches nothing
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if fl := lc.files[path]; fl != nil && (fl.inode != fi.Inode || fl.mtime != fi.MTime.UnixNano() || fl.ctime != fi.CTime.UnixNano()) {
		delete(lc.files, path)
	}
}

// store records a look-up's answer: every index of the batch below the
// file's length that is not among the chunks is a hole. Indices past the
// length are not cached, so a file that grows is looked up again. The
// chunks' replicas are in the master's order.
func (lc *locationCache) store(path string, first int64, info *chunkfs.FileInfo, chunks []*chunkLoc) {
	now := lc.c.clock.Now()
	exp := now.Add(lc.ttl)
	length, inode, mtime, ctime := info.Length, info.Inode, info.MTime.UnixNano(), info.CTime.UnixNano()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	fl := lc.fileLocked(path)
	if fl.inode != inode || fl.mtime != mtime || fl.ctime != ctime {
		clear(fl.chunks) // chunks of another version of the file
		clear(fl.expires)
	}
	fl.inode, fl.mtime, fl.ctime = inode, mtime, ctime
	fl.length, fl.lenTime = length, now
	for i := first; i < first+int64(lc.batch) && i*lc.c.chunkSize < length; i++ {
		fl.chunks[i] = nil
		fl.expires[i] = exp
	}
	for _, cl := range chunks {
		if cl.index < first || cl.index >= first+int64(lc.batch) {
			continue
		}
		fl.chunks[cl.index] = lc.c.near.locateForReads(cl)
		fl.expires[cl.index] = exp
	}
}

// forget drops the cached location of one chunk (after writing to it).
func (lc *locationCache) forget(path string, index int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if fl := lc.files[path]; fl != nil {
		delete(fl.chunks, index)
		delete(fl.expires, index)
	}
}

func (lc *locationCache) fileLocked(path string) *fileLocs {
	fl := lc.files[path]
	if fl != nil {
		return fl
	}
	if len(lc.files) >= maxCachedFiles {
		for k := range lc.files {
			delete(lc.files, k)
			break
		}
	}
	fl = &fileLocs{chunks: make(map[int64]*chunkLoc), expires: make(map[int64]time.Time)}
	lc.files[path] = fl
	return fl
}

// setLength records a length the client itself committed, if larger.
func (lc *locationCache) setLength(path string, length int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if fl := lc.files[path]; fl != nil && length > fl.length {
		fl.length = length
	}
}

// drop forgets everything about path.
func (lc *locationCache) drop(path string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	delete(lc.files, path)
}

// dropPrefix forgets path and everything under it (after rename or delete).
func (lc *locationCache) dropPrefix(path string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for k := range lc.files {
		if k == path || len(k) > len(path) && k[:len(path)] == path && (path == "/" || k[len(path)] == '/') {
			delete(lc.files, k)
		}
	}
}

// nearness orders replicas by network distance from this client: addresses
// on this host first, then the same /24 (IPv4) or /64 (IPv6), then the rest.
// Among replicas at one distance, writes keep the master's order (the chain
// it balanced over the servers; every writer of a chunk then pushes along
// the same chain), and reads break ties by a hash of the client and chunk,
// so many clients spread their small reads over the replicas while one
// client keeps using the same one.
type nearness struct {
	local []net.IP
	seed  uint64
}

func newNearness() *nearness {
	n := &nearness{seed: randomUint64()}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			n.local = append(n.local, ipn.IP)
		}
	}
	return n
}

// locate orders a location from the master for writing (a copy; wire is
// left alone): replicas nearest first,
// equidistant ones in the master's order, which is the chain the data is
// pushed along. The master orders a new chunk's replicas so that, over a
// burst of new chunks, each server is last (forwards nothing) in its share
// of chains (internal/master/chain_order.go); with an order per client a
// third of the servers forwarded every chain they were in.
func (n *nearness) locate(wire *chunkLoc) *chunkLoc {
	loc := *wire
	loc.replicas = slices.Clone(wire.replicas)
	slices.SortStableFunc(loc.replicas, func(a, b string) int { return n.distance(a) - n.distance(b) })
	return &loc
}

// locateForReads orders a location from the master for reading (a copy):
// nearest first, ties broken per client and chunk (order).
func (n *nearness) locateForReads(wire *chunkLoc) *chunkLoc {
	loc := n.locate(wire)
	n.order(loc.replicas, uint64(wire.handle))
	return loc
}

// order sorts addrs nearest first, ties broken by a hash of the client's
// seed, salt and the address.
func (n *nearness) order(addrs []string, salt uint64) {
	key := func(a string) (int, uint32) {
		h := fnv.New32a()
		var b [16]byte
		for i := range 8 {
			b[i] = byte(n.seed >> (8 * i))
			b[8+i] = byte(salt >> (8 * i))
		}
		h.Write(b[:])
		h.Write([]byte(a))
		return n.distance(a), h.Sum32()
	}
	slices.SortStableFunc(addrs, func(a, b string) int {
		da, ha := key(a)
		db, hb := key(b)
		if da != db {
			return da - db
		}
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
}

// distance is 0 for this host, 1 for the same subnet, 2 otherwise.
func (n *nearness) distance(addr string) int {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 2
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return 2
	}
	if ip.IsLoopback() {
		return 0
	}
	best := 2
	for _, l := range n.local {
		switch {
		case l.Equal(ip):
			return 0
		case sameSubnet(l, ip):
			best = 1
		}
	}
	return best
}

func sameSubnet(a, b net.IP) bool {
	if a4, b4 := a.To4(), b.To4(); a4 != nil && b4 != nil {
		return a4.Mask(net.CIDRMask(24, 32)).Equal(b4.Mask(net.CIDRMask(24, 32)))
	}
	return a.Mask(net.CIDRMask(64, 128)).Equal(b.Mask(net.CIDRMask(64, 128)))
}

// length returns the file's length, from the cache when it is known to be at
// least want and fresh, otherwise from a look-up of the chunks at index.
func (lc *locationCache) length(ctx context.Context, path string, want, index int64) (int64, error) {
	now := lc.c.clock.Now()
	lc.mu.Lock()
	fl := lc.files[path]
	if fl != nil && fl.length >= want && now.Before(fl.lenTime.Add(lc.ttl)) {
		n := fl.length
		lc.mu.Unlock()
		return n, nil
	}
	lc.mu.Unlock()
	if err := lc.fetch(ctx, path, index); err != nil {
		return 0, err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if fl := lc.files[path]; fl != nil {
		return fl.length, nil
	}
	return 0, nil
}
