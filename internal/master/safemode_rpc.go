package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// SafeMode reads the master's safe mode (get, or no action), holds it in
// safe mode (enter) or ends it (leave), as hdfs dfsadmin -safemode. Any
// user may read it; enter and leave need the superuser and are logged
// (safemode.go), and leave also ends this master's start-up safe mode at
// once. It answers the state after the action.
func (m service) SafeMode(ctx context.Context, req *pb.SafeModeRequest) (*pb.SafeModeResponse, error) {
	op := "safemode " + req.Action
	if len(req.Action) > 16 {
		op = "safemode"
	}
	who, err := m.caller(ctx, "SafeMode", op, "", req.Caller)
	if err != nil {
		return nil, err
	}
	switch req.Action {
	case "", "get":
	case "enter", "leave":
		if !who.Superuser() {
			return nil, chunkfs.E(op, "", chunkfs.KindPermission, "needs the superuser")
		}
		if err := m.logSafeMode(ctx, req.Action == "enter"); err != nil {
			return nil, err
		}
	default:
		return nil, chunkfs.E("safemode", "", chunkfs.KindInvalid, "unknown action; want get, enter or leave")
	}
	safe, why, held := m.safeModeStatus()
	return &pb.SafeModeResponse{StateId: m.state.stateID(), SafeMode: safe, Reason: why, Held: held}, nil
}
