package rpc

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/chunkfs/chunkfs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestStatusRoundTrip(t *testing.T) {
	in := chunkfs.E("create", "/a/b", chunkfs.KindExist, "already there")
	out := Err(Status(in))
	var e *chunkfs.Error
	if !errors.As(out, &e) {
		t.Fatalf("Err(Status(%v)) = %T, want *chunkfs.Error", in, out)
	}
	if e.Kind != chunkfs.KindExist || e.Op != "create" || e.Path != "/a/b" || e.Err.Error() != "already there" {
		t.Errorf("round trip = %+v", e)
	}
	if !errors.Is(out, fs.ErrExist) {
		t.Errorf("errors.Is(%v, fs.ErrExist) = false", out)
	}
	if st, _ := status.FromError(Status(in)); st.Code() != codes.AlreadyExists {
		t.Errorf("code = %v, want AlreadyExists", st.Code())
	}
}

func TestErrTransport(t *testing.T) {
	for _, c := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		if k := chunkfs.KindOf(Err(status.Error(c, "x"))); k != chunkfs.KindUnavailable {
			t.Errorf("code %v: kind %v, want unavailable", c, k)
		}
	}
	if k := chunkfs.KindOf(Err(Status(context.DeadlineExceeded))); k != chunkfs.KindUnavailable {
		t.Errorf("deadline: kind %v", k)
	}
	if Err(nil) != nil || Status(nil) != nil {
		t.Error("nil must stay nil")
	}
	// A call its caller cancelled says so, as well as being unavailable.
	if err := Err(status.Error(codes.Canceled, "x")); !errors.Is(err, context.Canceled) || chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("canceled: %v (kind %v), want context.Canceled of kind unavailable", err, chunkfs.KindOf(err))
	}
	if err := Err(status.Error(codes.Unavailable, "x")); errors.Is(err, context.Canceled) {
		t.Errorf("unavailable: %v is context.Canceled", err)
	}
}
