package namespace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"

	"github.com/chunkfs/chunkfs"
)

// snapshotMagic starts every snapshot, followed by the format version:
// 1 without extended attributes, 2 with them, 3 also with the chunkservers
// being decommissioned after the inodes, 4 with directory entries apart
// from inodes (hard links), 5 with the trash after the chunkservers, 6
// also with the operators' safe mode after the trash, 7 also with the
// cluster ID, 8 also with the held-back replicas. Restore reads all eight.
var snapshotMagic = []byte("CFNS")

const (
	snapshotV1       = 1
	snapshotLinks    = 4 // the first format with hard links
	snapshotTrash    = 5 // the first format with the trash
	snapshotSafeMode = 6 // the first format with the operators' safe mode
	snapshotCluster  = 7 // the first format with the cluster ID
	snapshotHeld     = 8 // the first format with the held-back replicas
	snapshotVersion  = 8
)

// maxDepth bounds directory nesting in a snapshot (a valid path cannot be
// deeper).
const maxDepth = chunkfs.MaxPathLen / 2

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot writes the whole state to w in a compact format: a header of
// counters, then every directory entry in tree order (parents first,
// entries sorted by name) with varint fields, then the chunkservers being
// decommissioned, then the trash (its period, ID counter and entries,
// each with its tree), then the operators' safe mode hold, then a CRC32C
// of everything before it. An entry is its name and uvarint(inode
// number<<1 | linked): linked means the inode was written at an earlier
// entry (a hard link), and nothing follows; otherwise the inode does, a
// non-directory with its link count. Equal states give equal bytes.
func (ns *Namespace) Snapshot(w io.Writer) error { return ns.snapshotAs(w, snapshotVersion) }

// snapshotAs writes the state in format version (tests write older
// formats; those fail on an inode with several names).
func (ns *Namespace) snapshotAs(w io.Writer, version byte) error {
	f := &Frozen{ns: ns, draining: ns.draining, trash: ns.trash.entries, paths: ns.trash.paths, period: ns.trash.period, nextID: ns.trash.nextID, held: ns.HeldBackAll()}
	f.header = Namespace{root: ns.root, nextInode: ns.nextInode, nextHandle: ns.nextHandle, chunkSize: ns.chunkSize,
		defaultRepl: ns.defaultRepl, leaseHorizon: ns.leaseHorizon, safe: ns.safe, clusterID: ns.clusterID}
	return f.write(w, version)
}

// write writes f's state in format version, each inode as f sees it.
func (f *Frozen) write(w io.Writer, version byte) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	scratch := &inode{}
	view := func(n *inode) *inode { return f.view(n, scratch) }
	s := &snapWriter{w: bw, crc: crc32.New(crcTable), version: version, seen: map[*inode]bool{}, view: view}
	h := &f.header
	s.raw(snapshotMagic)
	s.raw([]byte{version})
	for _, v := range []uint64{h.nextInode, uint64(h.nextHandle), uint64(h.chunkSize), uint64(h.defaultRepl)} {
		s.uvarint(v)
	}
	s.varint(h.leaseHorizon)
	s.inode("", h.root)
	if version >= 3 {
		s.uvarint(uint64(len(f.draining)))
		for _, id := range f.draining {
			s.string(id)
		}
	}
	if version >= snapshotTrash {
		s.trash(f)
	}
	if version >= snapshotSafeMode {
		held := uint64(0)
		if h.safe.held {
			held = 1
		}
		s.uvarint(held)
		s.varint(h.safe.left)
	}
	if version >= snapshotCluster {
		s.string(h.clusterID)
	}
	if version >= snapshotHeld {
		s.held(f.held)
	}
	s.raw(binary.BigEndian.AppendUint32(nil, s.crc.Sum32()))
	if s.err != nil {
		return s.err
	}
	return bw.Flush()
}

// view returns n as f sees it: as it was at the freeze, or live for a
// namespace written in place.
func (f *Frozen) view(n, scratch *inode) *inode {
	if f.cs == nil {
		return n
	}
	return f.cs.view(n, scratch)
}

type snapWriter struct {
	w   *bufio.Writer
	crc interface {
		io.Writer
		Sum32() uint32
	}
	buf     []byte
	version byte
	seen    map[*inode]bool // inodes with several names, once written
	view    func(*inode) *inode
	err     error
}

func (s *snapWriter) raw(b []byte) {
	if s.err != nil {
		return
	}
	s.crc.Write(b)
	_, s.err = s.w.Write(b)
}

func (s *snapWriter) uvarint(v uint64) { s.raw(binary.AppendUvarint(s.buf[:0], v)) }
func (s *snapWriter) varint(v int64)   { s.raw(binary.AppendVarint(s.buf[:0], v)) }
func (s *snapWriter) string(v string) {
	s.uvarint(uint64(len(v)))
	s.raw([]byte(v))
}

// trash writes the trash: period, ID counter, and each entry with its
// tree.
func (s *snapWriter) trash(f *Frozen) {
	s.uvarint(uint64(f.period))
	s.uvarint(f.nextID)
	s.uvarint(uint64(len(f.trash)))
	for _, e := range f.trash {
		s.uvarint(e.id)
		s.string(e.path(f.paths))
		s.varint(e.time)
		s.uvarint(uint64(e.uid))
		s.inode("", e.node)
	}
}

// held writes the held-back replicas: the chunks in handle order, each
// with its replicas (server ID, version) in server order.
func (s *snapWriter) held(chunks []HeldBackChunk) {
	s.uvarint(uint64(len(chunks)))
	for _, c := range chunks {
		s.uvarint(uint64(c.Handle))
		s.uvarint(uint64(len(c.Replicas)))
		for _, b := range c.Replicas {
			s.string(b.Server)
			s.uvarint(uint64(b.Version))
		}
	}
}

// inode writes the entry name → n, and n unless an earlier entry did.
func (s *snapWriter) inode(name string, live *inode) {
	n := s.view(live)
	if n == nil {
		if s.err == nil {
			s.err = errors.New("namespace: checkpoint ended before it was written (a newer one froze the state)")
		}
		return
	}
	if s.version >= snapshotLinks {
		s.string(name)
		if s.seen[live] {
			s.uvarint(n.ino()<<1 | 1)
			return
		}
		if n.nlink > 1 {
			s.seen[live] = true
		}
		s.uvarint(n.ino() << 1)
		s.uvarint(uint64(n.mode))
	} else {
		if n.nlink > 1 && s.err == nil {
			s.err = fmt.Errorf("snapshot format %d cannot hold inode %d's %d names", s.version, n.ino(), n.nlink)
		}
		s.uvarint(uint64(n.mode))
		s.string(name)
		s.uvarint(n.ino())
	}
	for _, v := range []uint64{uint64(n.uid), uint64(n.gid)} {
		s.uvarint(v)
	}
	for _, v := range []int64{n.mtime, n.atime, n.ctime} {
		s.varint(v)
	}
	if s.version >= 2 {
		xs := n.xattrs()
		s.uvarint(uint64(len(xs)))
		for _, x := range xs {
			s.string(x.name)
			s.raw(binary.AppendUvarint(s.buf[:0], uint64(len(x.value))))
			s.raw(x.value)
		}
	}
	if s.version >= snapshotLinks && !n.isDir() {
		s.uvarint(uint64(n.nlink))
	}
	switch {
	case n.isDir():
		s.uvarint(uint64(n.ext().kids.Len()))
		n.ext().kids.all(func(name string, k *inode) bool {
			s.inode(name, k)
			return s.err == nil
		})
	case n.isSymlink():
		s.string(n.ext().target)
	case n.isDevice():
		s.uvarint(uint64(n.ext().rdev))
	default:
		s.varint(n.length)
		s.uvarint(uint64(n.repl()))
		s.uvarint(uint64(len(n.chunks())))
		for _, r := range n.chunks() {
			s.uvarint(uint64(r.handle))
			if r.handle != 0 {
				s.uvarint(uint64(r.version))
			}
		}
	}
}

// Restore reads a state written by Snapshot. It treats r as untrusted:
// the checksum must match, sizes are bounded, names and order checked,
// handles must be unique and below the counter, and the result must pass
// Check.
func Restore(r io.Reader) (*Namespace, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("namespace: restore: %w", err)
	}
	ns, err := restore(b)
	if err == nil {
		err = ns.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: restore: %w", err)
	}
	return ns, nil
}

func restore(b []byte) (*Namespace, error) {
	if len(b) < len(snapshotMagic)+5 {
		return nil, errors.New("truncated snapshot")
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(sum) {
		return nil, errors.New("checksum mismatch")
	}
	s := &snapReader{reader: reader{b: body, what: "snapshot"}, links: map[uint64]*inode{}}
	ns, err := s.namespace()
	if err == nil && s.left() != 0 {
		err = errors.New("trailing bytes")
	}
	return ns, err
}

// snapReader parses a snapshot held in memory; the first error sticks.
type snapReader struct {
	reader
	version byte
	links   map[uint64]*inode // inodes with several names, by number, once read
}

func (s *snapReader) namespace() (*Namespace, error) {
	if m := s.full(len(snapshotMagic)); s.err == nil && string(m) != string(snapshotMagic) {
		return nil, errors.New("not a namespace snapshot")
	}
	if v := s.full(1); s.err == nil {
		s.version = v[0]
		if s.version < snapshotV1 || s.version > snapshotVersion {
			return nil, fmt.Errorf("snapshot format %d is not one this master reads", s.version)
		}
	}
	ns := New()
	ns.nextInode = s.uvarint(MaxInode)
	ns.nextHandle = chunkfs.Handle(s.uvarint(1<<63 - 1))
	ns.chunkSize = int64(s.uvarint(1 << 32))
	ns.defaultRepl = uint8(s.uvarint(chunkfs.MaxReplication))
	ns.leaseHorizon = s.varint()
	ns.dirs = 0
	name, root := s.inode(ns, 0)
	if s.version >= 3 {
		s.draining(ns)
	}
	if s.version >= snapshotTrash {
		s.trash(ns)
	}
	if s.version >= snapshotSafeMode {
		ns.safe.held = s.uvarint(1) == 1
		ns.safe.left = s.varint()
	}
	if s.version >= snapshotCluster {
		ns.clusterID = s.string(MaxClusterIDLen)
		if s.err == nil && ns.clusterID != "" && checkClusterID(ns.clusterID) != nil {
			return nil, errors.New("bad cluster ID")
		}
	}
	if s.version >= snapshotHeld {
		s.held(ns)
	}
	if s.err != nil {
		return nil, s.err
	}
	if !root.isDir() || root.ino() != RootInode || name != "" {
		return nil, errors.New("bad root")
	}
	root.nlink = 0
	ns.root = root
	return ns, s.err
}

// inode reads one entry: its name and the inode it names, read with its
// subtree unless an earlier entry named it. It returns a nil inode after
// an error.
func (s *snapReader) inode(ns *Namespace, depth int) (string, *inode) {
	n := &inode{nlink: 1}
	var name string
	var ino uint64
	if s.version >= snapshotLinks {
		name = s.string(chunkfs.MaxNameLen)
		v := s.uvarint(1<<64 - 1)
		ino = v >> 1
		if v&1 != 0 {
			return name, s.linked(ino)
		}
		n.mode = fs.FileMode(s.uvarint(1<<32 - 1))
	} else {
		n.mode = fs.FileMode(s.uvarint(1<<32 - 1))
		name = s.string(chunkfs.MaxNameLen)
		ino = s.uvarint(1<<63 - 1)
	}
	n.uid, n.gid = uint32(s.uvarint(1<<32-1)), uint32(s.uvarint(1<<32-1))
	n.mtime, n.atime, n.ctime = s.varint(), s.varint(), s.varint()
	var xs []xattr
	if s.version >= 2 {
		xs = s.xattrs()
	}
	if s.version >= snapshotLinks && !n.isDir() {
		n.nlink = uint16(s.uvarint(MaxLinks))
	}
	if s.err != nil {
		return "", nil
	}
	if ino == 0 || ino >= ns.nextInode || n.nlink == 0 {
		s.fail("inode number %d out of range or without a name", ino)
		return "", nil
	}
	n.setIno(ino)
	if n.nlink > 1 {
		if s.links[n.ino()] != nil {
			s.fail("inode %d written twice", n.ino())
			return "", nil
		}
		s.links[n.ino()] = n
	}
	switch n.mode.Type() {
	case fs.ModeDir:
		n.setExt(&ext{})
		ns.dirs++
		s.kids(ns, n, depth)
	case fs.ModeSymlink:
		n.setExt(&ext{target: s.string(chunkfs.MaxSymlinkLen)})
		n.length = int64(len(n.ext().target))
		ns.files++
		ns.bytes += n.length
	case 0, fs.ModeNamedPipe, fs.ModeSocket:
		s.file(ns, n)
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		n.setExt(&ext{rdev: uint32(s.uvarint(1<<32 - 1))})
		ns.files++
	default:
		s.fail("unknown file type %v", n.mode.Type())
	}
	if len(xs) > 0 {
		if n.ext() == nil {
			n.setExt(&ext{})
		}
		n.ext().xattrs = xs
	}
	if s.err != nil {
		return "", nil
	}
	return name, n
}

// linked returns the inode an entry names that an earlier entry read.
// Check, after Restore, counts the names against the link count.
func (s *snapReader) linked(ino uint64) *inode {
	n := s.links[ino]
	if n == nil && s.err == nil {
		s.fail("entry names inode %d, not read before with several names", ino)
	}
	return n
}

// xattrs reads an inode's extended attributes: bounded, valid, sorted.
func (s *snapReader) xattrs() []xattr {
	count := s.uvarint(MaxXattrTotal)
	var xs []xattr
	total := 0
	for i := uint64(0); i < count && s.err == nil; i++ {
		x := xattr{name: s.string(MaxXattrName)}
		x.value = []byte(s.string(MaxXattrValue))
		total += len(x.name) + len(x.value)
		switch {
		case s.err != nil:
		case checkXattrName("restore", "", x.name) != nil:
			s.fail("bad attribute name %q", x.name)
		case len(xs) > 0 && x.name <= xs[len(xs)-1].name:
			s.fail("attributes unsorted or repeated at %q", x.name)
		case total > MaxXattrTotal:
			s.fail("attributes larger than %d bytes", MaxXattrTotal)
		}
		xs = append(xs, x)
	}
	return xs
}

func (s *snapReader) kids(ns *Namespace, d *inode, depth int) {
	if depth >= maxDepth {
		s.fail("directories nested too deep")
		return
	}
	count := s.uvarint(uint64(s.left())) // an entry takes two bytes at least
	for i := uint64(0); i < count && s.err == nil; i++ {
		name, k := s.inode(ns, depth+1)
		if s.err != nil {
			return
		}
		if name == "" || name <= d.ext().kids.lastName() || pathProblem("/"+name) != "" {
			s.fail("bad or unsorted name %q", name)
			return
		}
		if k.isDir() {
			k.ext().parent = d
		}
		d.ext().kids.appendSorted(name, k, int(count-i))
	}
}

func (s *snapReader) file(ns *Namespace, n *inode) {
	n.length = s.varint()
	n.setRepl(uint8(s.uvarint(chunkfs.MaxReplication)))
	count := s.uvarint(MaxFileChunks)
	if s.err != nil || n.length < 0 {
		s.fail("bad file")
		return
	}
	ns.files++
	ns.bytes += n.length
	var refs []chunkRef
	if count > 0 {
		refs = make([]chunkRef, 0, listCap(int(min(count, uint64(s.left()))))) // a ref takes a byte at least
	}
	for i := uint64(0); i < count && s.err == nil; i++ {
		var r chunkRef
		r.handle = chunkfs.Handle(s.uvarint(uint64(ns.nextHandle) - 1))
		if r.handle != 0 {
			r.version = chunkfs.Version(s.uvarint(1<<63 - 1))
			if ns.holds(r.handle, n) {
				s.fail("chunk %d held twice", r.handle)
				break
			}
			ns.ref(r.handle, n) // reference counts are derived, not stored
		}
		refs = append(refs, r)
	}
	n.setChunks(refs)
}

// draining reads the chunkservers being decommissioned: sorted, unique,
// bounded.
func (s *snapReader) draining(ns *Namespace) {
	n := s.uvarint(MaxDraining)
	for range n {
		id := s.string(MaxServerIDLen)
		if s.err != nil {
			return
		}
		if id == "" || (len(ns.draining) > 0 && id <= ns.draining[len(ns.draining)-1]) {
			s.fail("decommissioned servers empty, unsorted or repeated")
			return
		}
		ns.draining = append(ns.draining, id)
	}
}

// held reads the held-back replicas: chunks in ascending handle order,
// each with one to MaxHeldBackPerChunk replicas in ascending server order,
// MaxHeldBack in all. Check, after Restore, checks that each chunk exists
// at a version no higher than its facts'.
func (s *snapReader) held(ns *Namespace) {
	n := s.uvarint(MaxHeldBack)
	var last chunkfs.Handle
	for i := uint64(0); i < n && s.err == nil; i++ {
		h := chunkfs.Handle(s.uvarint(1<<64 - 1))
		k := s.uvarint(MaxHeldBackPerChunk)
		if s.err == nil && (h <= last || k == 0 || ns.heldCount+int(k) > MaxHeldBack) {
			s.fail("held-back replicas unsorted, empty or too many")
		}
		last = h
		list := make([]HeldBack, 0, k)
		for j := uint64(0); j < k && s.err == nil; j++ {
			b := HeldBack{Server: s.string(MaxServerIDLen), Version: chunkfs.Version(s.uvarint(1<<63 - 1))}
			if s.err == nil && (b.Server == "" || b.Version == 0 || (j > 0 && b.Server <= list[j-1].Server)) {
				s.fail("held-back replica unnamed, at version 0, unsorted or repeated")
			}
			list = append(list, b)
		}
		if s.err == nil {
			if ns.held == nil {
				ns.held = make(map[chunkfs.Handle][]HeldBack)
			}
			ns.held[h] = list
			ns.heldCount += len(list)
		}
	}
}

// trash reads the trash: a bounded period, the ID counter, and entries in
// ascending ID order, each a tree whose counts move from the live to the
// dead. Check, after Restore, checks the rest.
func (s *snapReader) trash(ns *Namespace) {
	t := &ns.trash
	t.period = int64(s.uvarint(uint64(MaxTrashPeriod)))
	t.nextID = s.uvarint(1<<63 - 1)
	count := s.uvarint(uint64(s.left())) // an entry takes several bytes
	// An entry and its tree take 16 bytes at least: a hostile count
	// allocates at most 3.5 times what it sent.
	t.entries = make([]trashEntry, 0, min(count, uint64(s.left()/16)))
	for i := uint64(0); i < count && s.err == nil; i++ {
		e := trashEntry{id: s.uvarint(t.nextID)}
		path := s.string(chunkfs.MaxPathLen)
		e.time = s.varint()
		e.uid = uint32(s.uvarint(1<<32 - 1))
		if s.err != nil {
			return
		}
		if e.id == 0 || len(t.entries) > 0 && e.id <= t.entries[len(t.entries)-1].id || pathProblem(path) != "" {
			s.fail("trash entry %d out of order or with a bad path", e.id)
			return
		}
		before := Counts{Files: ns.files, Dirs: ns.dirs, Bytes: ns.bytes, Chunks: int64(ns.handles.len())}
		var name string
		name, e.node = s.inode(ns, 1)
		if s.err != nil {
			return
		}
		if name != "" || e.node.nlink != 1 {
			s.fail("trash entry %d: bad root", e.id)
			return
		}
		e.setSum(Counts{Files: ns.files - before.Files, Dirs: ns.dirs - before.Dirs, Bytes: ns.bytes - before.Bytes})
		t.add(e, path)
		ns.markDead(e.node, true)
		ns.moveCounts(e.sum(), -1)
	}
	if s.err != nil {
		return
	}
	// An entry's chunks are those only its tree holds, as when it was
	// trashed (treeCounts): counted once every holder is known.
	for i := range t.entries {
		e := &t.entries[i]
		e.chunks = uint32(ns.treeCounts(e.node).Chunks)
		t.dead.Chunks += int64(e.chunks)
	}
}
