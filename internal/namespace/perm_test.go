package namespace

import (
	"io/fs"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// Callers of the permission table besides alice, bob and carol.
var (
	alice2 = chunkfs.Caller{UID: 1000, GIDs: []uint32{100, 102}}       // alice with a second group
	super  = chunkfs.Caller{UID: 1005, GIDs: []uint32{7}, Super: true} // the superuser group's member
)

// newPermTNS is newTNS with a world for the permission table:
//
//	/alice/private        0700 dir   alice:100
//	/alice/private/sub    0777 dir   alice:100
//	/alice/private/sub/f  0666 file  alice:100
//	/alice/private/sub/b  0666 file  bob:101
//	/alice/f              0644 file  alice:100
//	/alice/g              0664 file  alice:100 (carol may write)
//	/alice/f101           0644 file  alice:101
//	/alice/sx             6755 file  alice:100 (setuid, setgid)
//	/alice/sgdir          2775 dir   alice:100
//	/alice/sg101          2777 dir   root:101
//	/alice/x711           0711 dir   alice:100, holding file y 0644
//	/home/af              0644 file  alice:100 (in the sticky /home)
//	/home/bf              0644 file  bob:101
func newPermTNS(t *testing.T) *tns {
	s := newTNS(t)
	for _, f := range []struct {
		path     string
		dir      bool
		mode     fs.FileMode
		uid, gid uint32
	}{
		{"/alice/private", true, 0o700, 1000, 100},
		{"/alice/private/sub", true, 0o777, 1000, 100},
		{"/alice/private/sub/f", false, 0o666, 1000, 100},
		{"/alice/private/sub/b", false, 0o666, 1001, 101},
		{"/alice/f", false, 0o644, 1000, 100},
		{"/alice/g", false, 0o664, 1000, 100},
		{"/alice/f101", false, 0o644, 1000, 101},
		{"/alice/sx", false, 0o755 | fs.ModeSetuid | fs.ModeSetgid, 1000, 100},
		{"/alice/sgdir", true, 0o775 | fs.ModeSetgid, 1000, 100},
		{"/alice/sg101", true, 0o777 | fs.ModeSetgid, 0, 101},
		{"/alice/x711", true, 0o711, 1000, 100},
		{"/alice/x711/y", false, 0o644, 1000, 100},
		{"/home/af", false, 0o644, 1000, 100},
		{"/home/bf", false, 0o644, 1001, 101},
	} {
		op := OpCreate
		if f.dir {
			op = OpMkdir
		}
		s.ok(&Command{Op: op, Path: f.path, Mode: uint32(f.mode)})
		s.ok(&Command{Op: OpSetAttr, Path: f.path, Set: SetMode | SetUID | SetGID, Mode: uint32(f.mode), UID: f.uid, GID: f.gid})
	}
	return s
}

// TestPermissions is the POSIX authorisation of every mutation against
// the caller: each row runs on a fresh world, applies one command and
// expects it refused (changing nothing) or done, with the mode it leaves.
func TestPermissions(t *testing.T) {
	const any = fs.FileMode(1 << 31) // do not check the mode
	for _, tc := range []struct {
		name   string
		cmd    Command
		denied bool
		path   string      // whose mode to check after a success
		mode   fs.FileMode // expected permission bits there
	}{
		// Search permission on every step, not only the last directory.
		{"create below an unsearchable dir", Command{Op: OpCreate, Caller: bob, Path: "/alice/private/sub/x"}, true, "", any},
		{"mkdir -p below an unsearchable dir", Command{Op: OpMkdir, Caller: bob, Path: "/alice/private/sub/a/b", Flags: FlagParents}, true, "", any},
		{"rename out of an unsearchable dir", Command{Op: OpRename, Caller: bob, Path: "/alice/private/sub/b", Target: "/home/b"}, true, "", any},
		{"rename into an unsearchable dir", Command{Op: OpRename, Caller: bob, Path: "/home/bf", Target: "/alice/private/sub/bf"}, true, "", any},
		{"exchange with an unsearchable entry", Command{Op: OpRename, Caller: bob, Path: "/home/bf", Target: "/alice/private/sub/b", Flags: FlagExchange}, true, "", any},
		{"delete below an unsearchable dir", Command{Op: OpDelete, Caller: bob, Path: "/alice/private/sub/b"}, true, "", any},
		{"chmod own file below an unsearchable dir", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/private/sub/b", Set: SetMode, Mode: 0o600}, true, "", any},
		{"truncate below an unsearchable dir", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/private/sub/f", Set: SetLength}, true, "", any},
		{"owner below its own 0700 dir", Command{Op: OpCreate, Caller: alice, Path: "/alice/private/sub/x", Mode: 0o600}, false, "/alice/private/sub/x", 0o600},
		{"search-only dir: create needs write", Command{Op: OpCreate, Caller: bob, Path: "/alice/x711/z"}, true, "", any},

		// Sticky directories: only the entry's or the directory's owner.
		{"sticky: delete another's file", Command{Op: OpDelete, Caller: bob, Path: "/home/af"}, true, "", any},
		{"sticky: rename another's file", Command{Op: OpRename, Caller: bob, Path: "/home/af", Target: "/home/x"}, true, "", any},
		{"sticky: replace another's file", Command{Op: OpRename, Caller: bob, Path: "/home/bf", Target: "/home/af"}, true, "", any},
		{"sticky: owner deletes", Command{Op: OpDelete, Caller: alice, Path: "/home/af"}, false, "", any},
		{"sticky: superuser group deletes", Command{Op: OpDelete, Caller: super, Path: "/home/af"}, false, "", any},
		{"sticky: owner renames", Command{Op: OpRename, Caller: bob, Path: "/home/bf", Target: "/home/b2"}, false, "/home/b2", 0o644},

		// chmod: the owner or the superuser; a non-member loses setgid.
		{"chmod by another", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/f", Set: SetMode, Mode: 0o666}, true, "", any},
		{"chmod by the group", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/g", Set: SetMode, Mode: 0o666}, true, "", any},
		{"chmod by the owner", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetMode, Mode: 0o600}, false, "/alice/f", 0o600},
		{"chmod by the superuser group", Command{Op: OpSetAttr, Caller: super, Path: "/alice/f", Set: SetMode, Mode: 0o640}, false, "/alice/f", 0o640},
		{"chmod g+s in the group", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetMode, Mode: uint32(0o755 | fs.ModeSetgid)}, false, "/alice/f", 0o755 | fs.ModeSetgid},
		{"chmod g+s outside the group clears it", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f101", Set: SetMode, Mode: uint32(0o755 | fs.ModeSetgid)}, false, "/alice/f101", 0o755},
		{"chmod g+s by the superuser outside the group", Command{Op: OpSetAttr, Caller: super, Path: "/alice/f101", Set: SetMode, Mode: uint32(0o755 | fs.ModeSetgid)}, false, "/alice/f101", 0o755 | fs.ModeSetgid},
		{"chmod u+s by the owner", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f101", Set: SetMode, Mode: uint32(0o755 | fs.ModeSetuid)}, false, "/alice/f101", 0o755 | fs.ModeSetuid},

		// chown: only the superuser gives a file away; the owner may
		// chgrp to its own groups; either by a non-superuser drops
		// setuid and setgid.
		{"chown away by the owner", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetUID, UID: 1001}, true, "", any},
		{"chown to oneself by another", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/f", Set: SetUID, UID: 1001}, true, "", any},
		{"chown to the same owner by another", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/sx", Set: SetUID, UID: 1000}, true, "", any},
		{"chown to the same owner by the owner", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetUID, UID: 1000}, false, "/alice/f", 0o644},
		{"chown by the superuser group", Command{Op: OpSetAttr, Caller: super, Path: "/alice/f", Set: SetUID, UID: 1001}, false, "/alice/f", 0o644},
		{"chgrp to a group one is not in", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetGID, GID: 101}, true, "", any},
		{"chgrp by a non-owner member", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/g", Set: SetGID, GID: 100}, true, "", any},
		{"chgrp to the same group by another", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/sx", Set: SetGID, GID: 100}, true, "", any},
		{"chgrp to one's second group", Command{Op: OpSetAttr, Caller: alice2, Path: "/alice/f", Set: SetGID, GID: 102}, false, "/alice/f", 0o644},
		{"chgrp by the owner drops setuid and setgid", Command{Op: OpSetAttr, Caller: alice2, Path: "/alice/sx", Set: SetGID, GID: 102}, false, "/alice/sx", 0o755},
		{"chgrp to the same group drops them too", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/sx", Set: SetGID, GID: 100}, false, "/alice/sx", 0o755},
		{"chown by the superuser keeps them", Command{Op: OpSetAttr, Caller: super, Path: "/alice/sx", Set: SetUID | SetGID, UID: 1001, GID: 101}, false, "/alice/sx", 0o755 | fs.ModeSetuid | fs.ModeSetgid},
		{"chgrp of a setgid dir keeps setgid", Command{Op: OpSetAttr, Caller: alice2, Path: "/alice/sgdir", Set: SetGID, GID: 102}, false, "/alice/sgdir", 0o775 | fs.ModeSetgid},

		// utimes: to now, the owner or a writer; to chosen times, the owner.
		{"times to now by a writer", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/g", Set: SetATime | SetMTime, Flags: FlagTimesNow}, false, "/alice/g", 0o664},
		{"chosen times by a writer", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/g", Set: SetMTime, MTime: 42}, true, "", any},
		{"times to now by a reader", Command{Op: OpSetAttr, Caller: bob, Path: "/alice/g", Set: SetMTime, Flags: FlagTimesNow}, true, "", any},
		{"chosen times by the owner", Command{Op: OpSetAttr, Caller: alice, Path: "/alice/f", Set: SetATime | SetMTime, ATime: 7, MTime: 42}, false, "/alice/f", 0o644},
		{"chosen times by the superuser group", Command{Op: OpSetAttr, Caller: super, Path: "/alice/f", Set: SetMTime, MTime: 42}, false, "/alice/f", 0o644},

		// Truncation needs write permission, by setattr or create.
		{"truncate without write", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/f", Set: SetLength}, true, "", any},
		{"truncate by a writer", Command{Op: OpSetAttr, Caller: carol, Path: "/alice/g", Set: SetLength, Length: 3}, false, "/alice/g", 0o664},
		{"create-truncate without write", Command{Op: OpCreate, Caller: bob, Path: "/alice/g", Flags: FlagTruncate}, true, "", any},
		{"create-truncate by a writer", Command{Op: OpCreate, Caller: carol, Path: "/alice/g", Flags: FlagTruncate}, false, "/alice/g", 0o664},

		// A file made in a setgid directory of a group its creator is
		// not in does not keep a setgid bit it asks for.
		{"create setgid in a foreign setgid dir", Command{Op: OpCreate, Caller: alice, Path: "/alice/sg101/p", Mode: uint32(0o775 | fs.ModeSetgid)}, false, "/alice/sg101/p", 0o775},
		{"create setgid in one's setgid dir", Command{Op: OpCreate, Caller: alice, Path: "/alice/sgdir/p", Mode: uint32(0o775 | fs.ModeSetgid)}, false, "/alice/sgdir/p", 0o775 | fs.ModeSetgid},
		{"device node by the superuser group", Command{Op: OpCreate, Caller: super, Path: "/home/dev", Mode: uint32(0o600 | fs.ModeDevice), Rdev: 1}, false, "", any},
		{"device node by a user", Command{Op: OpCreate, Caller: alice, Path: "/alice/dev", Mode: uint32(0o600 | fs.ModeDevice), Rdev: 1}, true, "", any},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newPermTNS(t)
			cmd := tc.cmd
			if tc.denied {
				s.fails(&cmd, chunkfs.KindPermission)
				return
			}
			s.ok(&cmd)
			if tc.mode == any {
				return
			}
			if got := s.stat(chunkfs.Root, tc.path).FileMode &^ fs.ModeType; got != tc.mode {
				t.Errorf("%s: mode %v, want %v", tc.path, got, tc.mode)
			}
		})
	}
}

// TestReadPermissions: reads need search permission on every step, and
// read permission on what they read.
func TestReadPermissions(t *testing.T) {
	s := newPermTNS(t)
	for _, tc := range []struct {
		name string
		c    chunkfs.Caller
		err  error
	}{
		{"stat below an unsearchable dir", bob, s.statErr(bob, "/alice/private/sub/b")},
		{"list an unreadable dir", bob, s.listErr(bob, "/alice/private")},
		{"list a search-only dir", bob, s.listErr(bob, "/alice/x711")},
		{"chunks below an unsearchable dir", bob, s.chunksErr(bob, "/alice/private/sub/b", false)},
		{"write chunks without write", carol, s.chunksErr(carol, "/alice/f", true)},
	} {
		if chunkfs.KindOf(tc.err) != chunkfs.KindPermission {
			t.Errorf("%s: err %v, want permission denied", tc.name, tc.err)
		}
	}
	for _, err := range []error{
		s.statErr(bob, "/alice/x711/y"), // search without read suffices to stat
		s.listErr(super, "/alice/private"),
		s.chunksErr(carol, "/alice/g", true),
	} {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
	}
}

func (s *tns) statErr(c chunkfs.Caller, p string) error {
	_, err := s.ns.Stat(c, p)
	return err
}

func (s *tns) listErr(c chunkfs.Caller, p string) error {
	_, _, err := s.ns.List(c, p, "", 0)
	return err
}

func (s *tns) chunksErr(c chunkfs.Caller, p string, write bool) error {
	_, _, err := s.ns.Chunks(c, p, 0, 1, write)
	return err
}

// TestSuperRoundTrips: the superuser mark travels through the log's
// encoding, so every master decides alike.
func TestSuperRoundTrips(t *testing.T) {
	for _, c := range []chunkfs.Caller{super, {Super: true}, alice} {
		cmd := Command{Op: OpMkdir, Caller: c, Path: "/x"}
		d, err := DecodeCommand(cmd.Encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		if d.Caller.Super != c.Super || d.Caller.UID != c.UID {
			t.Errorf("%+v decoded as %+v", c, d.Caller)
		}
	}
}
