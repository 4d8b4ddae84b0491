package namespace

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/chunkfs/chunkfs"
)

// Op names a mutation.
type Op uint8

// The mutations. The numeric values are written to the log; append only.
const (
	OpInit         Op = iota + 1 // set ChunkSize and default Replication, once
	OpMkdir                      // Path, Mode, FlagParents
	OpCreate                     // Path, Mode, Replication, FlagExclusive, FlagTruncate, FlagFirstChunk, Target
	OpRename                     // Path → Target, FlagNoReplace or FlagExchange
	OpDelete                     // Path, FlagRecursive, FlagDirOnly, FlagFileOnly
	OpSetAttr                    // Path, Set mask and the fields it names, FlagTimesNow
	OpAllocChunk                 // Path, Index; FlagAppend
	OpBumpVersion                // Handle
	OpCommitLength               // Path, Length, FlagTouch; MTime: the mtime to set (the owner's choice) instead of now
	OpLeaseHorizon               // Horizon (Unix ns)
	OpSetVersion                 // Handle, Version; raises it, never lowers
	OpSetXattr                   // Path, Target = name, Value; Set = XattrCreate or XattrReplace
	OpRemoveXattr                // Path, Target = name
	OpDecommission               // Path = chunkserver ID: drain it (servers.go)
	OpRecommission               // Path = chunkserver ID: stop draining it
	OpLink                       // Path → Target: a new name for an existing non-directory

	// Copy-on-write snapshots (cow.go).
	OpSnapshot      Op = 17 // Path → Target: a copy of a file or tree sharing its chunks
	OpReserveHandle Op = 18 // take the next chunk handle for a copy-on-write copy
	OpCopyChunk     Op = 19 // Path: its chunk Handle, shared, becomes NewHandle (a copy at Version)

	// The trash (trash.go).
	OpTrash       Op = 20 // Path, FlagRecursive, FlagDirOnly, FlagFileOnly: delete into the trash
	OpUndelete    Op = 21 // Path = original path, Target = where to (empty: Path), Index = entry ID (0: Path's newest), FlagParents
	OpPurgeTrash  Op = 22 // Time: purge what is older than the trash period; Index = an entry to purge now instead
	OpTrashPeriod Op = 23 // Length = the grace period in ns (0: deleting deletes at once)

	// An operator's safe mode (safemode.go).
	OpSafeMode Op = 24 // FlagSafeModeEnter: an operator holds the master in safe mode; without: leaves it

	// The cluster's identity (clusterid.go).
	OpClusterID Op = 25 // Target = the cluster ID, set once

	// Held-back replicas (heldback.go).
	OpHoldBack Op = 26 // Handle, Version, Path = chunkserver ID: its replica is not counted at Version or below

	opEnd Op = 27
)

var opNames = [...]string{
	OpInit: "init", OpMkdir: "mkdir", OpCreate: "create", OpRename: "rename",
	OpDelete: "delete", OpSetAttr: "setattr", OpAllocChunk: "allocate chunk",
	OpBumpVersion: "bump version", OpCommitLength: "commit length",
	OpLeaseHorizon: "lease horizon", OpSetVersion: "set version",
	OpSetXattr: "setxattr", OpRemoveXattr: "removexattr",
	OpDecommission: "decommission", OpRecommission: "recommission",
	OpLink: "link", OpSnapshot: "snapshot", OpReserveHandle: "reserve handle",
	OpCopyChunk: "copy chunk",
	OpTrash:     "trash", OpUndelete: "undelete", OpPurgeTrash: "purge trash",
	OpTrashPeriod: "trash period", OpSafeMode: "safe mode", OpClusterID: "cluster id",
	OpHoldBack: "hold back",
}

func (o Op) String() string {
	if o > 0 && o < opEnd && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command flags, one bit each. The first eight keep the bits encoding 1
// gave them; the rest shared a bit with one of those there (v1Flags).
const (
	FlagParents       uint16 = 1 << iota // mkdir, undelete: make missing parents (mkdir -p)
	FlagExclusive                        // create: fail if it exists
	FlagTruncate                         // create: truncate an existing file
	FlagNoReplace                        // rename: fail if the target exists
	FlagRecursive                        // delete, trash: a directory and everything in it
	FlagDirOnly                          // delete, trash: only a directory (rmdir)
	FlagFileOnly                         // delete, trash: only a non-directory (unlink)
	FlagAppend                           // alloc: record append; index must be last or next
	FlagTouch                            // commit length: set mtime
	FlagTimesNow                         // setattr: the times it sets are the command's Time, as utimensat's UTIME_NOW
	FlagExchange                         // rename: swap source and target, both of which must exist (RENAME_EXCHANGE)
	FlagFirstChunk                       // create: allocate chunk 0 of the regular file it makes or truncates, in the same log entry
	FlagSafeModeEnter                    // safe mode: enter; without it, leave
	flagAll           = 1<<iota - 1
)

// SetAttr mask bits: which fields of a Command an OpSetAttr changes.
const (
	SetMode uint8 = 1 << iota
	SetUID
	SetGID
	SetATime
	SetMTime
	SetReplication
	SetLength
	setAll = SetMode | SetUID | SetGID | SetATime | SetMTime | SetReplication | SetLength
)

// Command is one mutation. Time is stamped by the leader that logs it, so
// applying it is deterministic. Which fields matter depends on Op.
type Command struct {
	Op          Op
	Flags       uint16
	Set         uint8 // OpSetAttr mask
	Time        int64 // Unix ns
	Caller      chunkfs.Caller
	Path        string
	Target      string // rename destination or symbolic link target
	Mode        uint32 // permission bits (fs.FileMode)
	UID, GID    uint32
	ATime       int64
	MTime       int64
	Replication uint32
	Length      int64           // a file's length: OpCommitLength, OpSetAttr's SetLength
	Index       int64           // OpAllocChunk: the chunk's index in its file; OpUndelete, OpPurgeTrash: a trash entry's ID
	ChunkSize   int64           // OpInit: the cluster's chunk size
	Horizon     int64           // OpLeaseHorizon: Unix ns before which every lease ends
	Version     chunkfs.Version // OpSetVersion: the version a chunk is raised to; OpHoldBack: the version a replica is not counted at
	Rdev        uint32          // OpCreate of a device node: its device number
	Handle      chunkfs.Handle
	Value       []byte         // an extended attribute's value
	NewHandle   chunkfs.Handle // OpCopyChunk: the handle of the copy
}

// Field presence bits of the encoding.
const (
	hasTime = 1 << iota
	hasCaller
	hasPath
	hasTarget
	hasMode
	hasUID
	hasGID
	hasATime
	hasMTime
	hasRepl
	hasLength
	hasHandle
	hasValue
	hasSuper     // the caller is the superuser by group (Caller.Super); no bytes
	hasNewHandle // OpCopyChunk's copy
	hasAll       = 1<<iota - 1
)

// The first byte of an encoded command. Encoding 1 has a flag byte whose
// bits some ops share; encoding 2, the one written, a varint of Flags.
const (
	encodingV1      = 1
	encodingVersion = 2
)

// Encode appends the compact binary form of c to b: a version byte, the op,
// the flags as a varint, the set mask, a presence bitmap, then each
// non-zero field as a varint or a length-prefixed string.
func (c *Command) Encode(b []byte) []byte {
	b = append(b, encodingVersion, byte(c.Op))
	b = binary.AppendUvarint(b, uint64(c.Flags))
	b = append(b, c.Set)
	b = binary.AppendUvarint(b, uint64(c.presence()))
	if c.Time != 0 {
		b = binary.AppendVarint(b, c.Time)
	}
	if c.Caller.UID != 0 || len(c.Caller.GIDs) > 0 {
		b = binary.AppendUvarint(b, uint64(c.Caller.UID))
		b = binary.AppendUvarint(b, uint64(len(c.Caller.GIDs)))
		for _, g := range c.Caller.GIDs {
			b = binary.AppendUvarint(b, uint64(g))
		}
	}
	b = appendString(b, c.Path)
	b = appendString(b, c.Target)
	for _, v := range []uint32{c.Mode, c.UID, c.GID} {
		if v != 0 {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	for _, v := range []int64{c.ATime, c.MTime} {
		if v != 0 {
			b = binary.AppendVarint(b, v)
		}
	}
	if c.Replication != 0 {
		b = binary.AppendUvarint(b, uint64(c.Replication))
	}
	if n := c.number(); n != 0 {
		b = binary.AppendVarint(b, n)
	}
	if c.Handle != 0 {
		b = binary.AppendUvarint(b, uint64(c.Handle))
	}
	if c.Value != nil {
		b = binary.AppendUvarint(b, uint64(len(c.Value)))
		b = append(b, c.Value...)
	}
	if c.NewHandle != 0 {
		b = binary.AppendUvarint(b, uint64(c.NewHandle))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	if s == "" {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (c *Command) presence() uint {
	var p uint
	set := func(bit uint, on bool) {
		if on {
			p |= bit
		}
	}
	set(hasTime, c.Time != 0)
	set(hasCaller, c.Caller.UID != 0 || len(c.Caller.GIDs) > 0)
	set(hasPath, c.Path != "")
	set(hasTarget, c.Target != "")
	set(hasMode, c.Mode != 0)
	set(hasUID, c.UID != 0)
	set(hasGID, c.GID != 0)
	set(hasATime, c.ATime != 0)
	set(hasMTime, c.MTime != 0)
	set(hasRepl, c.Replication != 0)
	set(hasLength, c.number() != 0)
	set(hasHandle, c.Handle != 0)
	set(hasValue, c.Value != nil)
	set(hasSuper, c.Caller.Super)
	set(hasNewHandle, c.NewHandle != 0)
	return p
}

// errCorrupt is the error of every malformed encoding.
var errCorrupt = errors.New("namespace: malformed command")

// DecodeCommand parses an encoded command of either encoding. It treats b
// as hostile: every length is bounded, every field checked, and trailing
// bytes rejected.
func DecodeCommand(b []byte) (*Command, error) {
	d := decoder{reader{b: b, what: "command"}}
	c, err := d.command()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return c, nil
}

type decoder struct{ reader }

func (d *decoder) command() (*Command, error) {
	version := d.byte()
	if d.err == nil && version != encodingV1 && version != encodingVersion {
		return nil, errors.New("unknown encoding version")
	}
	c := &Command{Op: Op(d.byte())}
	if version == encodingV1 {
		c.Flags = v1Flags(c.Op, d.byte())
	} else {
		c.Flags = uint16(d.uvarint(flagAll))
	}
	c.Set = d.byte()
	p := d.uvarint(hasAll)
	if d.err != nil {
		return nil, d.err
	}
	if c.Op == 0 || c.Op >= opEnd || opNames[c.Op] == "" {
		return nil, errors.New("unknown op")
	}
	if c.Op != OpSetXattr && c.Set&^setAll != 0 {
		return nil, errors.New("unknown setattr bits")
	}
	d.fields(c, uint(p))
	if d.err == nil && d.left() > 0 {
		d.fail("trailing bytes")
	}
	return c, d.err
}

// v1Flags reads encoding 1's flag byte as the flags of op: there
// FlagTouch, FlagTimesNow and FlagSafeModeEnter had FlagParents' bit,
// FlagExchange FlagRecursive's and FlagFirstChunk FlagAppend's.
func v1Flags(op Op, b byte) uint16 {
	f := uint16(b)
	move := func(from, to uint16) {
		if f&from != 0 {
			f = f&^from | to
		}
	}
	switch op {
	case OpCommitLength:
		move(FlagParents, FlagTouch)
	case OpSetAttr:
		move(FlagParents, FlagTimesNow)
	case OpSafeMode:
		move(FlagParents, FlagSafeModeEnter)
	case OpRename:
		move(FlagRecursive, FlagExchange)
	case OpCreate:
		move(FlagAppend, FlagFirstChunk)
	}
	return f
}

func (d *decoder) fields(c *Command, p uint) {
	if p&hasTime != 0 {
		c.Time = d.varint()
	}
	if p&hasCaller != 0 {
		c.Caller = d.caller()
	}
	if p&hasPath != 0 {
		c.Path = d.string(chunkfs.MaxPathLen)
	}
	if p&hasTarget != 0 {
		c.Target = d.string(max(chunkfs.MaxPathLen, chunkfs.MaxSymlinkLen))
	}
	for _, f := range []struct {
		bit uint
		v   *uint32
	}{{hasMode, &c.Mode}, {hasUID, &c.UID}, {hasGID, &c.GID}} {
		if p&f.bit != 0 {
			*f.v = uint32(d.uvarint(1<<32 - 1))
		}
	}
	if p&hasATime != 0 {
		c.ATime = d.varint()
	}
	if p&hasMTime != 0 {
		c.MTime = d.varint()
	}
	if p&hasRepl != 0 {
		c.Replication = uint32(d.uvarint(1<<32 - 1))
	}
	if p&hasLength != 0 {
		d.setNumber(c, d.varint())
	}
	if p&hasHandle != 0 {
		c.Handle = chunkfs.Handle(d.uvarint(1<<64 - 1))
	}
	if p&hasValue != 0 {
		c.Value = []byte(d.string(MaxXattrValue))
	}
	if p&hasNewHandle != 0 {
		c.NewHandle = chunkfs.Handle(d.uvarint(1<<64 - 1))
	}
	c.Caller.Super = p&hasSuper != 0
}

// number is the one number c carries in the encoding's length slot:
// whichever of Length, Index (also a trash entry's ID), ChunkSize, Horizon, Version and Rdev its Op
// uses (each op uses at most one).
func (c *Command) number() int64 {
	switch c.Op {
	case OpInit:
		return c.ChunkSize
	case OpAllocChunk, OpUndelete, OpPurgeTrash:
		return c.Index
	case OpLeaseHorizon:
		return c.Horizon
	case OpSetVersion, OpCopyChunk, OpHoldBack:
		return int64(c.Version)
	case OpCreate:
		return int64(c.Rdev)
	}
	return c.Length
}

// setNumber puts the length slot's n into the field c's Op uses.
func (d *decoder) setNumber(c *Command, n int64) {
	switch c.Op {
	case OpInit:
		c.ChunkSize = n
	case OpAllocChunk, OpUndelete, OpPurgeTrash:
		c.Index = n
	case OpLeaseHorizon:
		c.Horizon = n
	case OpSetVersion, OpCopyChunk, OpHoldBack:
		if n < 0 {
			d.fail("negative version")
		}
		c.Version = chunkfs.Version(n)
	case OpCreate:
		if n < 0 || n > 1<<32-1 {
			d.fail("device number out of range")
		}
		c.Rdev = uint32(n)
	default:
		c.Length = n
	}
}

func (d *decoder) caller() chunkfs.Caller {
	c := chunkfs.Caller{UID: uint32(d.uvarint(1<<32 - 1))}
	n := d.uvarint(MaxGroups)
	if d.err != nil {
		return c
	}
	c.GIDs = make([]uint32, n)
	for i := range c.GIDs {
		c.GIDs[i] = uint32(d.uvarint(1<<32 - 1))
	}
	return c
}
