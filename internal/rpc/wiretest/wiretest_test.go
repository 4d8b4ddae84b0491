package wiretest

import (
	"testing"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestFillLeavesNothingUnset: what Fill fills, Unset finds complete, into
// nested messages and lists; an empty message is all unset.
func TestFillLeavesNothingUnset(t *testing.T) {
	r := Fill(&pb.ClusterReportResponse{})
	if unset := Unset(r.ProtoReflect()); len(unset) > 0 {
		t.Errorf("unset after Fill: %v", unset)
	}
	if len(r.Servers) != 1 || len(r.Servers[0].Disks) != 1 || r.Servers[0].Disks[0].Free == 0 || r.Balance.Rate == 0 {
		t.Errorf("nested messages not filled: %v", r)
	}
	if unset := Unset((&pb.ClusterReportResponse{}).ProtoReflect()); len(unset) != (&pb.ClusterReportResponse{}).ProtoReflect().Descriptor().Fields().Len() {
		t.Errorf("an empty report has unset %v", unset)
	}
	op := Fill(&pb.MetaOp{})
	if op.Op == nil || Unset(op.ProtoReflect()) != nil {
		t.Errorf("a oneof: %v, unset %v", op, Unset(op.ProtoReflect()))
	}
}

// TestZero names the zero fields of a struct, into pointers and slices;
// ZeroAll its unexported ones too.
func TestZero(t *testing.T) {
	type inner struct{ A, B int }
	type outer struct {
		N     int
		S     string
		In    *inner
		List  []inner
		Empty []int
		hide  int
	}
	got := Zero(&outer{N: 1, In: &inner{A: 1}, List: []inner{{B: 2}}})
	want := []string{".S", ".In.B", ".List[0].A", ".Empty"}
	if len(got) != len(want) {
		t.Fatalf("Zero = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Zero = %v, want %v", got, want)
		}
	}
	if got := ZeroAll(&outer{S: "s", In: &inner{A: 1, B: 1}, List: []inner{{1, 2}}, Empty: []int{1}}); len(got) != 2 || got[0] != ".N" || got[1] != ".hide" {
		t.Fatalf("ZeroAll = %v, want [.N .hide]", got)
	}
}
