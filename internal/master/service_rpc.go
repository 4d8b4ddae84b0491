package master

import (
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// service is the master's RPC edge: it implements pb.MasterServer over a
// Master. The *_rpc.go files hold its methods; each turns the request into
// domain values, asks the Master, and turns the answer back into a
// response. No other file of the package sees a pb type
// (TestPBOnlyAtTheEdge), and every call of the generated interface has a
// method here (TestEveryCallHandled).
type service struct {
	pb.UnimplementedMasterServer // forward compatibility only: no call falls through to it
	*Master
}

// Server is the master's RPC service, in process: what Serve registers,
// for callers in the same binary (benchmarks, tests) that skip the network.
func (m *Master) Server() pb.MasterServer { return service{Master: m} }

// addService adds the master's service to srv.
func (m *Master) addService(srv *rpc.Server) { pb.RegisterMasterServer(srv, service{Master: m}) }
