package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestDetailRoundTrip: an error sent as a detail comes back with its kind,
// operation, path, message and leader hint; what is no chunkfs error gets a
// kind; a kind from a newer build is KindOther.
func TestDetailRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want chunkfs.Error
	}{
		{chunkfs.E("stat", "/a", chunkfs.KindNotExist, "no such file"), chunkfs.Error{Op: "stat", Path: "/a", Kind: chunkfs.KindNotExist}},
		{fmt.Errorf("wrapped: %w", chunkfs.E("mkdir", "/b", chunkfs.KindExist, "exists")), chunkfs.Error{Op: "mkdir", Path: "/b", Kind: chunkfs.KindExist}},
		{errors.New("disk on fire"), chunkfs.Error{Kind: chunkfs.KindOther}},
		{context.Canceled, chunkfs.Error{Kind: chunkfs.KindUnavailable}},
		{&chunkfs.Error{Op: "create", Path: "/c", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: "m2:7070"}}, chunkfs.Error{Op: "create", Path: "/c", Kind: chunkfs.KindNotLeader}},
	} {
		got := ErrorOf(DetailOf(tc.err))
		if got.Op != tc.want.Op || got.Path != tc.want.Path || got.Kind != tc.want.Kind {
			t.Errorf("%v came back as %+v, want %+v", tc.err, got, tc.want)
		}
		var hint *chunkfs.LeaderHint
		if tc.want.Kind == chunkfs.KindNotLeader && (!errors.As(got, &hint) || hint.Leader != "m2:7070") {
			t.Errorf("%v lost its leader hint: %v", tc.err, got)
		}
		if tc.want.Kind != chunkfs.KindNotLeader && got.Err == nil {
			t.Errorf("%v lost its message", tc.err)
		}
	}
	if got := ErrorOf(&pb.ErrorDetail{Kind: 9999, Message: "from the future"}); got.Kind != chunkfs.KindOther {
		t.Errorf("unknown kind came back as %v", got.Kind)
	}
	if ErrorOf(nil) != nil {
		t.Error("no detail is an error")
	}
}
