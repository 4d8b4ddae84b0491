package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestSetAttrTimesNow: a setattr that sets both times to now (touch(1),
// UTIME_NOW) goes to the master as times_now, which a writer who is not
// the owner may send; any time of the caller's choosing does not.
func TestSetAttrTimesNow(t *testing.T) {
	const times = fuse.FATTR_ATIME | fuse.FATTR_MTIME
	for _, tc := range []struct {
		valid uint32
		now   bool
	}{
		{times | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW, true},
		{times, false},
		{times | fuse.FATTR_MTIME_NOW, false}, // atime chosen
		{fuse.FATTR_MTIME | fuse.FATTR_MTIME_NOW, false},
		{fuse.FATTR_MODE, false},
	} {
		in := &fuse.SetAttrIn{}
		in.Valid = tc.valid
		if a := setAttrOf(in); a.TimesNow != tc.now {
			t.Errorf("valid %#x: times now %v, want %v", tc.valid, a.TimesNow, tc.now)
		}
	}
}
