package rpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/chunkfs/chunkfs/internal/reqid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The request ID (internal/reqid) of a call travels in the gRPC metadata
// under reqIDHeader, set by every client connection from the call's
// context and put back into the handler's context by every server. A
// malformed value (empty, longer than reqid.MaxLen, a character outside
// [0-9A-Za-z._-], several values) is ignored: the call is served without
// an ID, since a diagnostic header is no reason to refuse an operation.
const reqIDHeader = "chunkfs-" + reqid.Key

// withOutgoingID adds ctx's request ID, if any, to the call's metadata.
func withOutgoingID(ctx context.Context) context.Context {
	if id := reqid.From(ctx); id != "" {
		return metadata.AppendToOutgoingContext(ctx, reqIDHeader, id)
	}
	return ctx
}

// incomingID returns ctx carrying the request ID of the call's metadata,
// when it has a well-formed one.
func incomingID(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	if v := md.Get(reqIDHeader); len(v) == 1 {
		return reqid.With(ctx, v[0])
	}
	return ctx
}

// traceUnary puts a call's request ID in its handler's context and, for a
// call that has one, logs it at debug level once answered (method, gRPC
// code, time taken): with the ID in every process's lines, one
// operation's calls can be followed across the cluster. Calls without an
// ID (heartbeats, a server's own housekeeping) are not logged.
func traceUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx = incomingID(ctx)
		if reqid.From(ctx) == "" || !log.Enabled(ctx, slog.LevelDebug) {
			return handler(ctx, req)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		log.DebugContext(ctx, "rpc", "method", MethodName(info.FullMethod), "code", status.Code(err).String(), "took", time.Since(start))
		return resp, err
	}
}
