// Package chunkserver is the chunkserver: it keeps chunk replicas on local
// disks (internal/chunkstore), receives pushed data into a bounded buffer
// and forwards it along the replica chain (the data stream of internal/rpc),
// orders mutations as a chunk's primary, applies them as a secondary, serves
// verified reads, and reports to the master(s): registration with a full
// chunk report, then periodic heartbeats.
//
// Mutations follow GFS. The master grants a lease to one replica, the
// primary. A client pushes data to every replica, then asks the primary to
// write (or record-append) it. The primary, holding the chunk's order lock,
// assigns the next serial number, applies the mutation locally and has
// every secondary apply it; secondaries refuse serial numbers out of order.
// The primary answers once every replica has applied it, so an acknowledged
// mutation is on every replica; any failure is reported and the client
// retries.
//
// For re-replication the master has a server Clone a chunk from another:
// it pulls the chunk over the data stream, verified, and keeps it only
// once whole and durable, throttled in number and bandwidth (clone.go). A
// full disk answers KindNoSpace and corrupts nothing; a failing disk
// loses its directory's replicas, reported corrupt, not the server.
//
// With RequireTokens a client's request needs a chunk access token the
// master signed for its chunk and access, and a node's call a node's
// certificate (tokens.go).
//
// The generated wire types stay at the RPC edge: service.go holds the gRPC
// handlers and wire.go every conversion between pb messages and the
// server's own types (mutation, request, heartbeat, …) and the calls the
// server makes to peers and masters; the rest of the package never sees pb.
//
// A Server is made by Open (which loads the store and the server's ID),
// serves gRPC and the data stream on one listener with Serve, and stops
// with Close, which waits for every handler in flight, so a restart on
// the same directories never has two servers writing one chunk.
package chunkserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// idFile holds the server's stable ID in its first data directory.
const idFile = "chunkserver.id"

// clusterFile holds, beside it, the ID of the cluster the server joined
// at its first registration.
const clusterFile = "cluster.id"

// Server is a chunkserver.
type Server struct {
	cfg    Config
	log    *slog.Logger
	id     string
	store  *chunkstore.Store
	buf    *buffer
	peers  *rpc.Pool // masters and other chunkservers
	data   *rpc.DataClient
	load   atomic.Int32 // operations in flight
	clones *cloneLimiter
	keys   *tokenKeys // chunk access token keys learnt from the masters

	clusterMu sync.Mutex // guards cluster and its file
	cluster   string     // the cluster joined; "" before the first registration

	handlers sync.WaitGroup // gRPC handlers in flight; Close waits for them

	mu       sync.Mutex // guards chunks, addr, closed, serving, mux, grpc, stream
	chunks   map[chunkfs.Handle]*chunkState
	addr     string
	closed   bool
	serving  bool
	mux      *rpc.Mux
	grpc     *rpc.Server
	stream   *rpc.StreamServer
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // background goroutines
	reporter reporter
	traffic  traffic // data-stream bytes, for figures (figures.go)
}

// Open opens the data directories and loads the chunks held there.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc := chunkstore.DefaultConfig()
	sc.Dirs, sc.FS, sc.MaxChunkSize, sc.Reserve, sc.Logger = cfg.Dirs, cfg.FS, cfg.MaxChunkSize, cfg.Reserve, cfg.Logger
	store, err := chunkstore.Open(sc)
	if err != nil {
		return nil, err
	}
	id, err := loadID(cfg.Dirs[0])
	if err != nil {
		return nil, err
	}
	cluster, err := loadCluster(cfg.Dirs[0])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: reqid.Logger(cfg.Logger).With("chunkserver", id), id: id, store: store,
		buf:   newBuffer(cfg.Clock, cfg.BufferBytes, cfg.BufferExpiry),
		peers: cfg.Security.NewPool(), data: cfg.Security.NewDataClient(),
		clones: newCloneLimiter(cfg.Clock, cfg.CloneStreams, cfg.CloneRate), keys: newTokenKeys(),
		chunks: make(map[chunkfs.Handle]*chunkState), ctx: ctx, cancel: cancel, cluster: cluster,
	}
	s.reporter.init(s)
	return s, nil
}

// loadID reads the server ID from dir, making one on first start.
func loadID(dir string) (string, error) {
	p := filepath.Join(dir, idFile)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" || len(id) > 64 {
			return "", fmt.Errorf("chunkserver: bad ID in %s", p)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var r [16]byte
	rand.Read(r[:])
	id := "cs-" + hex.EncodeToString(r[:])
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(id + "\n"); err != nil {
		return "", err
	}
	return id, f.Sync()
}

// loadCluster reads the ID of the cluster the server joined from dir, ""
// if it joined none yet.
func loadCluster(dir string) (string, error) {
	p := filepath.Join(dir, clusterFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > 64 {
		return "", fmt.Errorf("chunkserver: bad cluster ID in %s", p)
	}
	return id, nil
}

// clusterID returns the ID of the cluster the server joined.
func (s *Server) clusterID() string {
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	return s.cluster
}

// joinCluster checks the cluster ID a master answered a registration
// with: the server's own, or, at its first registration with a master that
// has one, kept as its own (durably, before anything the master said is
// acted on). Another cluster's master is refused: pointed at it, or at a
// master whose directory was wiped, the server deletes nothing.
func (s *Server) joinCluster(id string) error {
	if id == "" {
		return nil // a master with no ID yet (an older one, or one just started)
	}
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	switch {
	case s.cluster == id:
		return nil
	case s.cluster != "":
		return chunkfs.E("register", s.id, chunkfs.KindPermission,
			fmt.Sprintf("this chunkserver belongs to cluster %s; the master serves cluster %s", s.cluster, id))
	case len(id) > 64 || strings.ContainsAny(id, " \n\t/"):
		return chunkfs.E("register", s.id, chunkfs.KindInvalid, "the master sent a bad cluster ID")
	}
	p := filepath.Join(s.cfg.Dirs[0], clusterFile)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(id + "\n")
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return fmt.Errorf("chunkserver: keep the cluster ID: %w", err)
	}
	s.cluster = id
	s.log.Info("joined cluster", "cluster", id)
	return nil
}

// ID returns the server's stable ID.
func (s *Server) ID() string { return s.id }

// Addr returns the advertised address, once Serve has started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve serves the gRPC ChunkServer service and the data stream on lis,
// registers with the masters and heartbeats to them, and verifies idle
// chunks in the background. It blocks until Close.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.start(lis); err != nil {
		lis.Close()
		return err
	}
	err := s.mux.Serve()
	s.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) start(lis net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.serving {
		return errors.New("chunkserver: closed or already serving")
	}
	s.serving = true
	s.addr = s.cfg.Addr
	if s.addr == "" {
		s.addr = lis.Addr().String()
	}
	sc := rpc.DefaultStreamConfig()
	sc.Client, sc.Logger, sc.IdleTimeout, sc.Authorize = s.data, s.log, s.cfg.StreamIdle, s.authorizeStream
	sc.BackgroundRate, sc.YieldRate = s.cfg.CloneSourceRate, s.cfg.UrgentYieldRate
	stream, err := rpc.NewStreamServer(streamHandler{s}, sc)
	if err != nil {
		return err
	}
	s.stream, s.mux, s.grpc = stream, s.cfg.Security.NewMux(lis, s.log), s.cfg.Security.NewObservedServer(s.log, s.cfg.OnCall)
	s.registerControl()
	mux, grpc := s.mux, s.grpc
	s.goBackgroundLocked(func() { grpc.Serve(mux.GRPC()) })
	s.goBackgroundLocked(func() { stream.Serve(mux.Data()) })
	for _, m := range s.cfg.Masters {
		s.goBackgroundLocked(func() { s.heartbeatLoop(m) })
	}
	s.goBackgroundLocked(s.housekeeping)
	return nil
}

// goBackground runs fn in a goroutine that Close waits for; once the
// server is closing it does nothing and returns false.
func (s *Server) goBackground(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goBackgroundLocked(fn)
}

func (s *Server) goBackgroundLocked(fn func()) bool {
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// Close stops serving, closes every connection and waits for the
// background goroutines. Chunk data stays on disk.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	mux, grpc, stream := s.mux, s.grpc, s.stream
	s.mu.Unlock()
	if mux != nil {
		mux.Close()
		grpc.Stop() // cancels the handlers' contexts, does not wait for them
		stream.Close()
	}
	s.handlers.Wait()
	s.wg.Wait()
	s.data.Close()
	return s.peers.Close()
}

// begin counts an operation in flight for the load figure of heartbeats.
func (s *Server) begin() func() {
	s.load.Add(1)
	return func() { s.load.Add(-1) }
}

// enter admits a gRPC handler: it counts it in the load, and Close waits
// for it, so that no handler of a closed server still touches the chunk
// files (a restarted server may already use them). Once the server is
// closing it fails with KindUnavailable.
func (s *Server) enter() (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, chunkfs.E("chunkserver", s.addr, chunkfs.KindUnavailable, "shutting down")
	}
	s.handlers.Add(1)
	end := s.begin()
	return func() {
		end()
		s.handlers.Done()
	}, nil
}

// admit enters a call (enter) if check, the caller's check, passes;
// done ends it.
func (s *Server) admit(check func() error) (done func(), err error) {
	if done, err = s.enter(); err != nil {
		return nil, err
	}
	if err := check(); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// peer is a link to the chunkserver at addr.
func (s *Server) peer(addr string) (peerLink, error) {
	c, err := s.peers.ChunkServer(addr)
	return peerLink{c}, err
}

// master is a link to the master at addr.
func (s *Server) master(addr string) (masterLink, error) {
	c, err := s.peers.Master(addr)
	return masterLink{c}, err
}

// callCtx bounds a call to a master or a peer.
func (s *Server) callCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.cfg.RPCTimeout)
}
