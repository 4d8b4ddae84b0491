package client

import "github.com/chunkfs/chunkfs"

// Moved tells f that the file it names is now at path: something renamed
// it (a FUSE mount renaming a file it has open, or hiding one that was
// unlinked while open). Later I/O through f names path. Data f buffered
// is sent there too, which is right, since it is the same file. f's
// caller makes sure that no I/O through f runs while the rename does.
func (f *File) Moved(path string) error {
	path, err := checkPath("moved", path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	old := f.path
	f.path = path
	f.mu.Unlock()
	f.c.Forget(old)
	return nil
}

// Forget drops what c caches of path and of everything below it (chunk
// locations and write leases), after another client, for instance one
// acting as another user through the same mount, removed, renamed,
// truncated or recreated it.
func (c *Client) Forget(path string) {
	c.locs.dropPrefix(path)
	c.leases.dropPrefix(path)
}

// dropPrefix forgets every lease of path and of the files below it.
func (lc *leaseCache) dropPrefix(path string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for k := range lc.entries {
		if under(k.path, path) {
			delete(lc.entries, k)
		}
	}
}

// under reports whether p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || len(p) > len(dir) && p[:len(dir)] == dir && (dir == "/" || p[len(dir)] == '/')
}

// Observe adopts id, a state ID another client of the same program has
// seen (StateID), so that c's reads, from observers too, see that state:
// read-your-writes across clients that act for one program, as a FUSE
// mount's clients for several users do.
func (c *Client) Observe(id chunkfs.StateID) { c.observe(uint64(id)) }
