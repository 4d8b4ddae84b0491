package master

import (
	"path"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// fsckReport is the health of the files under a path: per file and in
// total.
type fsckReport struct {
	stateID      uint64
	files        []fsckFile // every file checked, in path order
	filesChecked int64
	total        fsckCounts
	truncated    bool // more files than the limit: the totals cover those checked
	safeMode     bool // locations still being learnt: missing counts may fall
}

// fsckFile is the health of one file's chunks.
type fsckFile struct {
	path        string
	replication int
	length      int64
	fsckCounts
}

// fsckCounts counts chunks by health: each once, under the worst of
// missing, under-replicated or healthy; the missing ones whose only known
// copies are held back (missingHeldBack); and the corrupt replicas.
type fsckCounts struct {
	chunks, healthy, underReplicated, missing, heldBack, corrupt int64
}

func (c *fsckCounts) add(o fsckCounts) {
	c.chunks += o.chunks
	c.healthy += o.healthy
	c.underReplicated += o.underReplicated
	c.missing += o.missing
	c.heldBack += o.heldBack
	c.corrupt += o.corrupt
}

// fsck checks, as c, at most limit files under p (see Fsck).
func (m *Master) fsck(c chunkfs.Caller, p string, limit int64) (fsckReport, error) {
	var rep fsckReport
	var err error
	rep.safeMode, _ = m.startupSafeMode() // an operator's hold changes no count
	rep.stateID = m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		var fi chunkfs.FileInfo
		if fi, err = ns.Stat(c, p); err != nil {
			return
		}
		f := fsckWalk{m: m, ns: ns, c: c, rep: &rep, limit: limit, links: map[uint64]bool{}}
		err = f.visit(p, fi)
	})
	return rep, err
}

// fsckWalk is one Fsck's walk of the tree; it runs under the namespace's
// read lock and Master.regMu.
type fsckWalk struct {
	m     *Master
	ns    *namespace.Namespace
	c     chunkfs.Caller
	rep   *fsckReport
	limit int64
	links map[uint64]bool // files with several names, checked at the first
}

func (f *fsckWalk) visit(p string, fi chunkfs.FileInfo) error {
	switch {
	case f.rep.filesChecked >= f.limit:
		f.rep.truncated = true
		return nil
	case fi.IsDir():
		return f.dir(p)
	case fi.Mode().IsRegular() && fi.Nlink > 1 && f.links[fi.Inode]:
		return nil // a hard link of a file checked under another name
	case fi.Mode().IsRegular():
		if fi.Nlink > 1 {
			f.links[fi.Inode] = true
		}
		return f.file(p, fi)
	}
	return nil
}

func (f *fsckWalk) dir(p string) error {
	after := ""
	for {
		kids, more, err := f.ns.List(f.c, p, after, 0)
		if err != nil {
			if p == "/" || chunkfs.KindOf(err) != chunkfs.KindPermission {
				return err
			}
			return nil // a directory the caller may not read is skipped
		}
		for _, k := range kids {
			if err := f.visit(path.Join(p, k.FileName), k); err != nil {
				return err
			}
		}
		if !more || len(kids) == 0 || f.rep.truncated {
			return nil
		}
		after = kids[len(kids)-1].FileName
	}
}

func (f *fsckWalk) file(p string, fi chunkfs.FileInfo) error {
	out := fsckFile{path: p, replication: fi.Replication, length: fi.Length}
	for first := int64(0); first < max(fi.Chunks, 1); first += namespace.MaxChunkCount {
		_, chunks, err := f.ns.Chunks(f.c, p, first, namespace.MaxChunkCount, false)
		if err != nil {
			if chunkfs.KindOf(err) == chunkfs.KindPermission {
				return nil
			}
			return err
		}
		for _, ch := range chunks {
			h := f.m.reg.health(ch.Handle, ch.Version)
			out.chunks++
			switch {
			case h.live == 0 && ch.Index*f.ns.ChunkSize() >= fi.Length:
				out.healthy++ // holds no committed byte: nothing to lose
			case h.live == 0:
				out.missing++
				if missingHeldBack(h, f.ns, ch.Handle) {
					out.heldBack++
				}
			case h.live < fi.Replication:
				out.underReplicated++
			default:
				out.healthy++
			}
			out.corrupt += int64(h.corrupt)
		}
	}
	f.rep.filesChecked++
	f.rep.total.add(out.fsckCounts)
	f.rep.files = append(f.rep.files, out)
	return nil
}
