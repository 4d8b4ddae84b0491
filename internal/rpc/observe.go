package rpc

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// CallObserver is told of every unary call a server has answered: its full
// method name ("/chunkfs.v1.Master/Create"), the gRPC code of its answer
// ("OK", "NotFound", ...) and how long the server took. It is called on the
// handler's goroutine after the answer is decided and must not block.
type CallObserver func(fullMethod, code string, elapsed time.Duration)

// NewObservedServer is s.NewServer whose every unary call is also told to
// obs (nil: none). The observer sees a call refused by a guard or ended by
// a panic too, with the code it was answered with.
func (s *Security) NewObservedServer(log *slog.Logger, obs CallObserver, guards ...Guard) *grpc.Server {
	return s.newServer(log, obs, guards)
}

// observed puts obs's interceptor, when there is one, outside inner.
func observed(obs CallObserver, inner grpc.UnaryServerInterceptor) []grpc.UnaryServerInterceptor {
	if obs == nil {
		return []grpc.UnaryServerInterceptor{inner}
	}
	return []grpc.UnaryServerInterceptor{observeUnary(obs), inner}
}

// observeUnary times each call for obs. It runs outside the guards, so a
// refused call is counted with the code it was refused with.
func observeUnary(obs CallObserver) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		obs(info.FullMethod, status.Code(err).String(), time.Since(start))
		return resp, err
	}
}
