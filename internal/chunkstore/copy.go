package chunkstore

import (
	"fmt"

	"github.com/chunkfs/chunkfs"
)

// copyPiece is how much of a chunk Copy reads at a time: whole blocks.
const copyPiece = 16 * BlockSize

// Copy makes a new replica dst at version v, a copy of replica src, which
// must be held at v (a snapshot's copy-on-write: the master names a new
// handle for a shared chunk and every server holding it copies it
// locally). Every block of src is verified against its checksum as it is
// read, and the copy is built as an Incoming (temporary names, fsynced,
// renamed into place), so a failure or a crash leaves nothing of it. A
// replica dst already held at v (a repeated call) is kept and described.
func (s *Store) Copy(src chunkfs.Handle, v chunkfs.Version, dst chunkfs.Handle) (Info, error) {
	if src == dst || dst == 0 {
		return Info{}, chunkfs.E("copy", name(dst), chunkfs.KindInvalid, "the copy needs a new handle")
	}
	if in, err := s.Info(dst); err == nil && in.Version == v && !in.Corrupt {
		return in, nil
	}
	r, err := s.OpenReader(src)
	if err != nil {
		return Info{}, err
	}
	defer r.Close()
	info := r.Info()
	if info.Version != v {
		return Info{}, chunkfs.E("copy", name(src), chunkfs.KindStale, fmt.Sprintf("replica at version %d, not %d", info.Version, v))
	}
	in, err := s.BeginIncoming(dst, v)
	if err != nil {
		return Info{}, err
	}
	buf := make([]byte, copyPiece)
	for off := int64(0); off < info.Length; {
		n, _, err := r.ReadWithSums(off, buf[:min(int64(len(buf)), info.Length-off)], nil)
		if err == nil && n == 0 {
			err = chunkfs.E("copy", name(src), chunkfs.KindOther, "replica shorter than its length")
		}
		if err == nil {
			err = in.Write(buf[:n])
		}
		if err != nil {
			in.Abort()
			return Info{}, err
		}
		off += int64(n)
	}
	return in.Commit()
}
