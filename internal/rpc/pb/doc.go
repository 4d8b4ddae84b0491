// Package pb is the generated protobuf and gRPC code of chunkfs's control
// RPCs: the Master service (metadata for clients; registration and
// heartbeats for chunkservers; HA, locks and administration) and the
// ChunkServer service (leases, writes, appends, clones and the other
// chunk calls), with ErrorDetail, the status detail that carries a
// chunkfs.Error's Kind, Op and Path across the wire.
//
// The .proto files here are the source; `make proto` regenerates the Go
// code, which is committed. Only internal/rpc and this package import
// gRPC. The generated types belong at the RPC edge (STYLE.md, habit 16):
// servers and the client are to reason in their own types.
package pb
