// Package rpc holds chunkfs's wire: the protobuf/gRPC definitions (in pb),
// the translation of errors to and from gRPC status, gRPC server and client
// construction, and the framed data stream for bulk data. It is the only
// package that imports gRPC directly.
//
// The main types: a Mux shares one listening port between gRPC, the data
// stream and Raft, telling them apart by their first bytes after the TLS
// handshake; a Security is a process's mutual TLS (or its absence), used
// by every connection it opens or accepts; a Pool keeps one gRPC
// connection per address; a MasterSet is a group of masters seen as one
// connection that follows the leader; a DataClient pushes data along
// replica chains and reads chunk data, and StreamServer answers it. Every
// error that crosses the wire arrives as a *chunkfs.Error with its Kind,
// Op and Path.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// MaxMessageSize bounds a gRPC message in either direction. Bulk data does
// not travel over gRPC, so control messages stay small.
const MaxMessageSize = 16 << 20

// DefaultTimeout is the deadline given to a call whose context has none.
const DefaultTimeout = 30 * time.Second

// Server is a gRPC server.
type Server = grpc.Server

// ClientConn is a gRPC client connection.
type ClientConn = grpc.ClientConn

// Guard decides, before a handler runs, whether a call may reach it: a
// non-nil error is the call's answer. Method is the full gRPC method name
// ("/chunkfs.v1.Master/Create"); MethodName gives its last part.
type Guard func(ctx context.Context, method string, req any) error

// MethodName returns the last part of a full gRPC method name.
func MethodName(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

// NewServer returns a gRPC server whose handlers are guarded: a panic in a
// handler is logged and answered as an internal error, never crashing the
// process, guards may refuse a call before its handler, and errors are
// translated by Status. Served through a TLS Mux it adopts the Mux's TLS
// connections; on a listener of its own it serves plain TCP. Each call's arrival is noted for Arrival.
func NewServer(log *slog.Logger, guards ...Guard) *grpc.Server {
	return (*Security)(nil).NewServer(log, guards...)
}

// NewServer is rpc.NewServer for a process secured by s: through a Mux it
// adopts the Mux's TLS connections, and on a listener of its own it runs
// the TLS handshake itself (unless s is insecure).
func (s *Security) NewServer(log *slog.Logger, guards ...Guard) *grpc.Server {
	return s.newServer(log, nil, guards)
}

func (s *Security) newServer(log *slog.Logger, obs CallObserver, guards []Guard) *grpc.Server {
	log = reqid.Logger(log)
	return grpc.NewServer(
		grpc.Creds(newAdoptCreds(s)),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{traceUnary(log)}, observed(obs, unaryGuard(log, guards))...)...), // reqid.go: the request ID; observe.go: the metrics hook
		grpc.InTapHandle(stampArrival),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
}

func unaryGuard(log *slog.Logger, guards []Guard) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.ErrorContext(ctx, "rpc handler panic", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, "internal error")
			}
		}()
		for _, g := range guards {
			if err := g(ctx, info.FullMethod, req); err != nil {
				return nil, Status(err)
			}
		}
		resp, err = handler(ctx, req)
		if err != nil {
			err = Status(err)
		}
		return resp, err
	}
}

// Dial opens a plain-TCP client connection to addr. Calls without a
// deadline get DefaultTimeout.
func Dial(addr string) (*grpc.ClientConn, error) { return (*Security)(nil).Dial(addr) }

// Dial opens a client connection to addr secured by s (nil: plain TCP).
// Calls without a deadline get DefaultTimeout.
func (s *Security) Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(s.dialCreds(addr)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithConnectParams(reconnect),
		grpc.WithUnaryInterceptor(clientDeadline),
	)
}

// reconnect caps gRPC's reconnect back-off at a second (its default grows
// to two minutes): a server that restarts — a master, a chunkserver a
// client or a peer holds a pooled connection to — is reached again within
// a second of coming back, not minutes later, at the cost of one dial a
// second per connection to a server that stays down.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
}

func clientDeadline(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	return Err(invoker(withOutgoingID(ctx), method, req, reply, cc, opts...))
}

var kindCodes = map[chunkfs.Kind]codes.Code{
	chunkfs.KindInvalid:      codes.InvalidArgument,
	chunkfs.KindTooLarge:     codes.InvalidArgument,
	chunkfs.KindNotExist:     codes.NotFound,
	chunkfs.KindExist:        codes.AlreadyExists,
	chunkfs.KindPermission:   codes.PermissionDenied,
	chunkfs.KindNotEmpty:     codes.FailedPrecondition,
	chunkfs.KindNotDir:       codes.FailedPrecondition,
	chunkfs.KindIsDir:        codes.FailedPrecondition,
	chunkfs.KindUnavailable:  codes.Unavailable,
	chunkfs.KindNotLeader:    codes.Unavailable,
	chunkfs.KindChecksum:     codes.DataLoss,
	chunkfs.KindStale:        codes.FailedPrecondition,
	chunkfs.KindNoSpace:      codes.ResourceExhausted,
	chunkfs.KindNotSupported: codes.Unimplemented,
	chunkfs.KindChunkFull:    codes.OutOfRange,
	chunkfs.KindNotPrimary:   codes.FailedPrecondition,
	chunkfs.KindNoAttr:       codes.NotFound,
}

// Status converts err to a gRPC status error carrying its chunkfs Kind, Op
// and Path. Errors that already are gRPC statuses pass through.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isChunkfsError(err) {
		return err
	}
	switch {
	case !isChunkfsError(err) && errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case !isChunkfsError(err) && errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	e, detail := asError(err), DetailOf(err)
	code, ok := kindCodes[e.Kind]
	if !ok {
		code = codes.Unknown
	}
	st := status.New(code, e.Error())
	if withDetail, err := st.WithDetails(detail); err == nil {
		st = withDetail
	}
	return st.Err()
}

// asError returns err as a *chunkfs.Error: itself if it is one, else
// wrapped, KindUnavailable for a context's end, KindOther for the rest.
func asError(err error) *chunkfs.Error {
	var e *chunkfs.Error
	if errors.As(err, &e) {
		return e
	}
	k := chunkfs.KindOther
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		k = chunkfs.KindUnavailable
	}
	return &chunkfs.Error{Kind: k, Err: err}
}

// DetailOf is err in its wire form, as a gRPC status detail or a batch
// result carries it: kind, operation, path, the message of its cause and
// the leader's address of a "not the leader" answer. ErrorOf is its
// inverse; together they are the one conversion each way.
func DetailOf(err error) *pb.ErrorDetail {
	e := asError(err)
	d := &pb.ErrorDetail{Kind: uint32(e.Kind), Op: e.Op, Path: e.Path}
	if e.Err != nil {
		d.Message = e.Err.Error()
	}
	var hint *chunkfs.LeaderHint
	if errors.As(err, &hint) {
		d.Leader = hint.Leader
	}
	return d
}

// ErrorOf converts an error detail from the wire back to a *chunkfs.Error
// (nil for none). A kind this build does not know is KindOther.
func ErrorOf(d *pb.ErrorDetail) *chunkfs.Error {
	if d == nil {
		return nil
	}
	k := chunkfs.Kind(d.Kind)
	if d.Kind > math.MaxUint8 || !k.Valid() {
		k = chunkfs.KindOther
	}
	var inner error
	switch {
	case k == chunkfs.KindNotLeader:
		inner = &chunkfs.LeaderHint{Leader: d.Leader}
	case d.Message != "":
		inner = errors.New(d.Message)
	}
	return &chunkfs.Error{Op: d.Op, Path: d.Path, Kind: k, Err: inner}
}

func isChunkfsError(err error) bool {
	var e *chunkfs.Error
	return errors.As(err, &e)
}

// Err converts an error returned by a gRPC call back into a *chunkfs.Error.
// Transport failures and deadlines become KindUnavailable.
func Err(err error) error {
	if err == nil {
		return nil
	}
	if isChunkfsError(err) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return &chunkfs.Error{Kind: chunkfs.KindOther, Err: err}
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*pb.ErrorDetail); ok {
			return ErrorOf(ed)
		}
	}
	switch st.Code() {
	case codes.Canceled:
		// Keep context.Canceled in the chain: a caller that gave up
		// (an interrupted system call on a mount) must be told apart
		// from a server that failed.
		return &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: fmt.Errorf("%s: %w", st.Message(), context.Canceled)}
	case codes.Unavailable:
		if refusal := tlsRefusal(st.Message()); refusal != nil {
			return &chunkfs.Error{Kind: chunkfs.KindPermission, Err: refusal}
		}
		return &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: &unreachableError{msg: st.Message()}}
	case codes.DeadlineExceeded, codes.Aborted:
		return &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: errors.New(st.Message())}
	case codes.NotFound:
		return &chunkfs.Error{Kind: chunkfs.KindNotExist, Err: errors.New(st.Message())}
	case codes.InvalidArgument:
		return &chunkfs.Error{Kind: chunkfs.KindInvalid, Err: errors.New(st.Message())}
	case codes.PermissionDenied, codes.Unauthenticated:
		return &chunkfs.Error{Kind: chunkfs.KindPermission, Err: errors.New(st.Message())}
	case codes.Unimplemented:
		if strings.HasPrefix(st.Message(), "unknown service ") {
			// Another kind of server listens there (a master's address
			// taken by something else while it was down): the one called
			// was not reached, and the call was not applied.
			return &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: &unreachableError{msg: st.Message()}}
		}
		return &chunkfs.Error{Kind: chunkfs.KindNotSupported, Err: errors.New(st.Message())}
	}
	return &chunkfs.Error{Kind: chunkfs.KindOther, Err: errors.New(st.Message())}
}

// unreachableError is a call that failed in the transport (no server
// answered), as opposed to a server's own KindUnavailable answer.
type unreachableError struct{ msg string }

func (u *unreachableError) Error() string { return u.msg }

// Unreachable reports whether err is a call that reached no server: the
// connection could not be made or broke. A caller with other servers to
// try may try them.
func Unreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

var errPoolClosed = &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: errors.New("connection pool closed")}
