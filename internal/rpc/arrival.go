package rpc

import (
	"context"
	"time"

	"google.golang.org/grpc/tap"
)

// arrivalKey keys the time a call's headers arrived in its context.
type arrivalKey struct{}

// stampArrival is the server's tap handle: it runs in the connection's
// reader as a call's headers arrive, before the call has a goroutine, and
// notes the time in the call's context.
func stampArrival(ctx context.Context, _ *tap.Info) (context.Context, error) {
	return context.WithValue(ctx, arrivalKey{}, time.Now()), nil
}

// Arrival returns when the call whose server context ctx is arrived: its
// headers were read. The time from there to a guard running is the call's
// queue time: waiting for its request body, for a goroutine and for the
// CPU (HDFS's RPC queue time).
func Arrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(arrivalKey{}).(time.Time)
	return t, ok
}
