package chunkstore

import (
	"errors"
	"syscall"

	"github.com/chunkfs/chunkfs"
)

// diskError classifies a failed file-system call on chunk h: a full disk
// (ENOSPC, EDQUOT) is KindNoSpace, anything else KindOther.
func (s *Store) diskError(op string, h chunkfs.Handle, err error) error {
	var ce *chunkfs.Error
	if errors.As(err, &ce) {
		return err
	}
	kind := chunkfs.KindOther
	if isNoSpace(err) {
		kind = chunkfs.KindNoSpace
	}
	return &chunkfs.Error{Op: op, Path: name(h), Kind: kind, Err: err}
}

// isNoSpace reports whether err says the disk is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
