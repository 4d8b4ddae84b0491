package chunkfs

import (
	"errors"
	"io/fs"
	"strings"
)

// Kind classifies an error. It is what crosses RPC boundaries: clients, the
// CLI and the FUSE layer decide on the Kind, never on error text.
type Kind uint8

// The kinds of error. The numeric values travel on the wire; append only.
const (
	KindOther        Kind = iota // unclassified
	KindInvalid                  // invalid argument
	KindNotExist                 // file or chunk does not exist
	KindExist                    // file already exists
	KindPermission               // permission denied
	KindNotEmpty                 // directory not empty
	KindNotDir                   // not a directory
	KindIsDir                    // is a directory
	KindUnavailable              // service unavailable or unreachable; retry later
	KindChecksum                 // data failed its checksum
	KindStale                    // chunk version is stale
	KindNoSpace                  // no space or no servers left
	KindNotSupported             // operation not supported
	KindChunkFull                // record does not fit in the chunk; retry on the next
	KindNotPrimary               // this chunkserver holds no valid lease for the chunk
	KindTooLarge                 // argument exceeds a size limit
	KindNotLeader                // this master is not the leader
	KindNoAttr                   // no such extended attribute
	kindCount
)

var kindNames = [...]string{
	KindOther:        "error",
	KindInvalid:      "invalid argument",
	KindNotExist:     "no such file or directory",
	KindExist:        "file exists",
	KindPermission:   "permission denied",
	KindNotEmpty:     "directory not empty",
	KindNotDir:       "not a directory",
	KindIsDir:        "is a directory",
	KindUnavailable:  "unavailable",
	KindChecksum:     "checksum mismatch",
	KindStale:        "stale chunk version",
	KindNoSpace:      "no space left",
	KindNotSupported: "not supported",
	KindChunkFull:    "chunk full",
	KindNotPrimary:   "not the primary",
	KindTooLarge:     "too large",
	KindNotLeader:    "not the leader",
	KindNoAttr:       "no such attribute",
}

func (k Kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return "unknown error kind"
}

// Valid reports whether k is a known kind (for decoding wire values).
func (k Kind) Valid() bool { return k < kindCount }

// Sentinel errors for kinds that io/fs has no counterpart for.
var (
	ErrNotEmpty    = errors.New("directory not empty")
	ErrNotDir      = errors.New("not a directory")
	ErrIsDir       = errors.New("is a directory")
	ErrChecksum    = errors.New("checksum mismatch")
	ErrStale       = errors.New("stale chunk version")
	ErrUnavailable = errors.New("unavailable")
	ErrNoSpace     = errors.New("no space left")
	ErrUnsupported = errors.New("not supported")
)

// sentinel returns the standard error a kind is equivalent to under errors.Is.
func (k Kind) sentinel() error {
	switch k {
	case KindInvalid, KindTooLarge:
		return fs.ErrInvalid
	case KindNotExist:
		return fs.ErrNotExist
	case KindExist:
		return fs.ErrExist
	case KindPermission:
		return fs.ErrPermission
	case KindNotEmpty:
		return ErrNotEmpty
	case KindNotDir:
		return ErrNotDir
	case KindIsDir:
		return ErrIsDir
	case KindChecksum:
		return ErrChecksum
	case KindStale:
		return ErrStale
	case KindUnavailable, KindNotLeader:
		return ErrUnavailable
	case KindNoSpace:
		return ErrNoSpace
	case KindNotSupported:
		return ErrUnsupported
	}
	return nil
}

// Error is the error type of chunkfs: an operation, the path (or chunk) it
// concerned, a Kind and the underlying error. errors.Is(err, fs.ErrNotExist)
// and the like work through Kind.
type Error struct {
	Op   string // operation, e.g. "create"
	Path string // path or chunk it concerned, if any
	Kind Kind
	Err  error // underlying error, may be nil
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
	}
	if e.Path != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Path)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString(e.Kind.String())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel error of e's Kind.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && s == target
}

// E builds an *Error. msg, if not empty, becomes the underlying error text.
func E(op, path string, k Kind, msg string) *Error {
	var err error
	if msg != "" {
		err = errors.New(msg)
	}
	return &Error{Op: op, Path: path, Kind: k, Err: err}
}

// LeaderHint is the underlying error of a KindNotLeader error from a
// master that knows which master leads: Leader is that master's client
// address, where the call should go instead.
type LeaderHint struct {
	Leader string
}

func (h *LeaderHint) Error() string {
	if h.Leader == "" {
		return "not the leader; no leader known"
	}
	return "not the leader; the leader is " + h.Leader
}

// KindOf returns the Kind of the first *Error in err's chain, or
// KindOther when there is none (and for nil, KindOther as well).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindOther
}
