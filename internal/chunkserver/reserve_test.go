package chunkserver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// reserve asks the primary (server 0) for room for a record of n bytes.
func (tc *testCluster) reserve(h chunkfs.Handle, v chunkfs.Version, chunkSize int64, id chunkfs.DataID, n int) error {
	_, err := tc.cs(0).Reserve(context.Background(), &pb.ReserveRequest{Handle: uint64(h), Version: uint64(v), DataId: uint64(id), Length: int64(n), Secondaries: tc.addrs[1:], ChunkSize: chunkSize})
	return err
}

// reserveAndAppend reserves room for data, then pushes and appends it as
// a client does; reserved reports whether the reservation was granted.
func (tc *testCluster) reserveAndAppend(h chunkfs.Handle, v chunkfs.Version, chunkSize int64, data []byte) (off int64, reserved bool, err error) {
	id := tc.newID()
	if err := tc.reserve(h, v, chunkSize, id, len(data)); err != nil {
		return 0, false, err
	}
	if err := tc.data.Push(context.Background(), tc.addrs, id, data); err != nil {
		return 0, true, err
	}
	resp, err := tc.cs(0).Append(context.Background(), &pb.AppendRequest{Handle: uint64(h), Version: uint64(v), DataId: uint64(id), Length: int64(len(data)), Secondaries: tc.addrs[1:], ChunkSize: chunkSize})
	if err != nil {
		return 0, true, err
	}
	return resp.Offset, true, nil
}

// chunkLength is chunk h's length on server i.
func (tc *testCluster) chunkLength(i int, h chunkfs.Handle) int64 {
	tc.t.Helper()
	info, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h)})
	if err != nil {
		tc.t.Fatalf("chunk info on %d: %v", i, err)
	}
	return info.Length
}

// TestReserveRefusesBeforePush: room reserved counts against records that
// come later, reserved or not; a refusal beside reservations leaves the
// chunk unpadded so that the reserved records still land, and one with
// nothing reserved pads it as Append does.
func TestReserveRefusesBeforePush(t *testing.T) {
	const chunkSize = 256 << 10
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	r := rand.New(rand.NewPCG(2, 2))
	recs := [][]byte{randBytes(r, 64<<10), randBytes(r, 64<<10), randBytes(r, 64<<10), randBytes(r, 60<<10)}
	ids := make([]chunkfs.DataID, len(recs))
	for i, rec := range recs {
		ids[i] = tc.newID()
		if err := tc.reserve(1, 1, chunkSize, ids[i], len(rec)); err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
	}
	// 252 KiB reserved: 8 KiB more does not fit, and nothing is padded.
	if err := tc.reserve(1, 1, chunkSize, tc.newID(), 8<<10); chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("reserve beyond the room left: %v, want KindChunkFull", err)
	}
	if _, err := tc.appendRecord(1, 1, chunkSize, randBytes(r, 8<<10)); chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("unreserved append beyond the room left: %v, want KindChunkFull", err)
	}
	if n := tc.chunkLength(0, 1); n != 0 {
		t.Fatalf("chunk is %d bytes after refusals beside reservations, want 0 (not padded)", n)
	}
	// A small unreserved record still fits beside them.
	small := randBytes(r, 4<<10)
	if off, err := tc.appendRecord(1, 1, chunkSize, small); err != nil || off != 0 {
		t.Fatalf("small unreserved append: offset %d, %v", off, err)
	}
	want := slicesConcat(small)
	for i := len(recs) - 1; i >= 0; i-- { // in another order than reserved
		if err := tc.data.Push(context.Background(), tc.addrs, ids[i], recs[i]); err != nil {
			t.Fatal(err)
		}
		resp, err := tc.cs(0).Append(context.Background(), &pb.AppendRequest{Handle: 1, Version: 1, DataId: uint64(ids[i]), Length: int64(len(recs[i])), Secondaries: tc.addrs[1:], ChunkSize: chunkSize})
		if err != nil {
			t.Fatalf("append of reserved record %d: %v", i, err)
		}
		if resp.Offset != int64(len(want)) {
			t.Fatalf("reserved record %d at %d, want %d", i, resp.Offset, len(want))
		}
		want = append(want, recs[i]...)
	}
	if got := tc.sameReplicas(1, 1); !bytes.Equal(got, want) {
		t.Fatalf("replicas hold %d bytes, not the %d appended", len(got), len(want))
	}
	// Nothing reserved now: a record that does not fit pads the chunk.
	if err := tc.reserve(1, 1, chunkSize, tc.newID(), 64<<10); chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("reserve in the full chunk: %v, want KindChunkFull", err)
	}
	if got := tc.sameReplicas(1, 1); len(got) != chunkSize || !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], make([]byte, chunkSize-len(want))) {
		t.Fatalf("chunk is %d bytes, want its records padded with zeros to %d", len(got), chunkSize)
	}
}

func slicesConcat(p ...[]byte) []byte { return bytes.Join(p, nil) }

// TestReservationLapses: a reservation whose Append never comes stops
// holding room after reserveTTL, and one at an older version holds none.
func TestReservationLapses(t *testing.T) {
	const chunkSize = 256 << 10
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	for range 4 {
		if err := tc.reserve(1, 1, chunkSize, tc.newID(), chunkSize/4); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.reserve(1, 1, chunkSize, tc.newID(), 1); chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("reserve beyond the room left: %v, want KindChunkFull", err)
	}
	tc.clock.Advance(reserveTTL / 2)
	tc.grant(1, 1) // renew the lease, which lasts a minute
	tc.clock.Advance(reserveTTL/2 + time.Second)
	tc.grant(1, 1)
	if err := tc.reserve(1, 1, chunkSize, tc.newID(), chunkSize/4); err != nil {
		t.Fatalf("reserve after the others lapsed: %v", err)
	}
	tc.grant(1, 2) // a new version: its reservations start afresh
	for range 4 {
		if err := tc.reserve(1, 2, chunkSize, tc.newID(), chunkSize/4); err != nil {
			t.Fatalf("reserve at the new version: %v", err)
		}
	}
}

// TestReserveRefusals: bad requests, a server that is not primary and a
// chunk with maxReservations outstanding are refused, and none of them
// changes the chunk.
func TestReserveRefusals(t *testing.T) {
	const chunkSize = 256 << 10
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  *pb.ReserveRequest
		kind chunkfs.Kind
	}{
		{"chunk size 0", &pb.ReserveRequest{Handle: 1, Version: 1, Length: 10, Secondaries: tc.addrs[1:]}, chunkfs.KindInvalid},
		{"huge chunk size", &pb.ReserveRequest{Handle: 1, Version: 1, Length: 10, ChunkSize: 1 << 62, Secondaries: tc.addrs[1:]}, chunkfs.KindInvalid},
		{"negative length", &pb.ReserveRequest{Handle: 1, Version: 1, Length: -1, ChunkSize: chunkSize, Secondaries: tc.addrs[1:]}, chunkfs.KindTooLarge},
		{"over a quarter chunk", &pb.ReserveRequest{Handle: 1, Version: 1, Length: chunkSize/4 + 1, ChunkSize: chunkSize, Secondaries: tc.addrs[1:]}, chunkfs.KindTooLarge},
		{"old version", &pb.ReserveRequest{Handle: 1, Version: 0, Length: 10, ChunkSize: chunkSize, Secondaries: tc.addrs[1:]}, chunkfs.KindNotPrimary},
		{"no such chunk", &pb.ReserveRequest{Handle: 99, Version: 1, Length: 10, ChunkSize: chunkSize, Secondaries: tc.addrs[1:]}, chunkfs.KindNotPrimary},
	} {
		_, err := tc.cs(0).Reserve(ctx, c.req)
		if chunkfs.KindOf(err) != c.kind {
			t.Errorf("%s: %v, want %v", c.name, err, c.kind)
		}
	}
	if _, err := tc.cs(1).Reserve(ctx, &pb.ReserveRequest{Handle: 1, Version: 1, Length: 10, ChunkSize: chunkSize}); chunkfs.KindOf(err) != chunkfs.KindNotPrimary {
		t.Errorf("reserve at a secondary: %v, want KindNotPrimary", err)
	}
	for range maxReservations {
		if err := tc.reserve(1, 1, chunkSize, tc.newID(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.reserve(1, 1, chunkSize, tc.newID(), 1); chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("reservation %d: %v, want KindChunkFull", maxReservations+1, err)
	}
	for i := range tc.servers {
		if n := tc.chunkLength(i, 1); n != 0 {
			t.Fatalf("chunk on server %d is %d bytes after refusals, want 0", i, n)
		}
	}
}
