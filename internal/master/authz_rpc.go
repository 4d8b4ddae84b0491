package master

import (
	"context"
	"errors"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// authGuard refuses, before its handler, a call its peer may not make:
// the wrong role, a user's forged claim, an admin call of a non-superuser.
// The caller each handler acts as comes from Master.caller, which asks
// authorize again for the request's (or batch operation's) claim.
func (m *Master) authGuard(ctx context.Context, method string, req any) error {
	var claimed *pb.Caller
	if r, ok := req.(interface{ GetCaller() *pb.Caller }); ok {
		claimed = r.GetCaller()
	}
	c, err := claimedCaller(method, claimed)
	if err != nil {
		return err
	}
	_, err = authorize(m.cfg.policy(), peerIdentity(ctx), rpc.MethodName(method), c)
	return err
}

// caller is the caller a request of call method, claiming c, acts as.
func (m *Master) caller(ctx context.Context, method, op, p string, c *pb.Caller) (chunkfs.Caller, error) {
	claimed, err := claimedCaller(op, c)
	if err != nil {
		return chunkfs.Caller{}, err
	}
	who, err := authorize(m.cfg.policy(), peerIdentity(ctx), method, claimed)
	if err != nil {
		var e *chunkfs.Error
		if errors.As(err, &e) {
			e.Op, e.Path = op, p
		}
	}
	return who, err
}

// claimedCaller converts a request's caller, bounding its group list; nil
// when the request names none.
func claimedCaller(op string, c *pb.Caller) (*chunkfs.Caller, error) {
	if c == nil {
		return nil, nil
	}
	if len(c.Gids) > namespace.MaxGroups {
		return nil, chunkfs.E(op, "", chunkfs.KindInvalid, "caller names too many groups")
	}
	return &chunkfs.Caller{UID: c.Uid, GIDs: c.Gids}, nil
}

// pathArg validates a path argument and decides the caller of a request
// of call method.
func (m *Master) pathArg(ctx context.Context, method, op, p string, c *pb.Caller) (chunkfs.Caller, error) {
	if err := namespace.ValidatePath(op, p); err != nil {
		return chunkfs.Caller{}, err
	}
	return m.caller(ctx, method, op, p, c)
}
