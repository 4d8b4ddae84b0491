// Package client is the Go library for chunkfs, a distributed file system
// after the Google File System.
//
// A Client talks to the master for metadata and straight to chunkservers for
// data; data never flows through the master. Its API follows package os and
// io/fs:
//
//	c, err := client.Dial(ctx, "127.0.0.1:7000")
//	f, err := c.Create(ctx, "/logs/today")
//	io.Copy(f, src)
//	err = f.Close()
//
// Every method that talks to the cluster takes a context.Context. A *File
// keeps the context it was opened with for its io methods (Read, Write,
// Seek, Close…), which have no context parameter: cancel that context to
// abort the file's I/O. Because fs.FS's Open(name) cannot take a context,
// the io/fs view of a cluster is a separate value, c.FS(ctx), which
// implements fs.FS, fs.StatFS and fs.ReadDirFS so fs.WalkDir works.
//
// Errors are *chunkfs.Error values whose Kind makes errors.Is work with
// fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, fs.ErrInvalid and the
// sentinels of package chunkfs. Paths are absolute ("/a/b").
//
// Consistency follows GFS: a write acknowledged by Sync or Close is on every
// replica; concurrent writers to one region leave it consistent (every
// replica byte-identical) but possibly a mix of their writes; a failed write
// may leave the region inconsistent until it is written again. File.Append
// is a record append: atomic, at least once, at an offset the primary picks.
// Records are framed so a RecordReader returns each exactly once.
//
// Each operation (a namespace call, an open, a read, a flush of written
// data, an append, a sync) carries a request ID of its own to the master
// and to every chunkserver it reaches, which log it as req=…: with debug
// logging, one slow operation can be followed across the cluster. The
// client's own log lines about it carry the ID too.
//
// Package chunkfstest starts a throwaway in-process cluster for tests, as
// net/http/httptest does for HTTP; the examples here use it.
package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Config configures a Client. Start from DefaultConfig.
type Config struct {
	// Master is the host:port of the master, or of each master of a
	// highly available group, separated by commas ("a:7070,b:7070,c:7070"):
	// calls go to the leader, following "not the leader" answers and
	// skipping masters that cannot be reached. A call no master received
	// (one master restarting, say) is tried again until its deadline.
	Master string
	// LeaderReads sends every call to a group's leader, none to its
	// observers (which otherwise take stat, list and chunk look-ups).
	LeaderReads bool
	// AutoMsync, when positive and reads go to observers, makes a read
	// that starts this long after the last msync sync first (Msync), so
	// that it sees other clients' writes at most that much late. 0: only a
	// client's own writes and what it had seen when it started.
	AutoMsync time.Duration
	// Caller is the identity requests act as; DefaultConfig uses the
	// process's user and groups.
	Caller chunkfs.Caller
	// Security secures the client's connections to masters and
	// chunkservers: mutual TLS with its certificate, or plain TCP when nil
	// or Insecure() (security.go).
	Security *Security
	// Umask clears permission bits of files and directories the client
	// creates, like a process's umask.
	Umask fs.FileMode
	// WriteBuffer is how many bytes a File buffers before sending them to
	// the chunkservers; a buffer is also flushed at chunk boundaries, on
	// Sync, Close, Seek and before reads. 0 disables buffering.
	WriteBuffer int
	// WriteBehind is how many bytes of a File's writes may be on their way
	// to the replicas at once: up to WriteBehind/WriteBuffer flushes (at
	// least two) push their data in parallel while the application goes on
	// writing, and apply it in order. Several flushes in flight keep the
	// NIC busy across chunks: a file written in small buffers over many
	// chunks pushes to several replica chains at once, so one chain slowed
	// by other writers does not hold the writer to its rate. 0 means two
	// flushes.
	WriteBehind int
	// LocationTTL is how long chunk locations stay cached.
	LocationTTL time.Duration
	// LookupBatch is how many consecutive chunks one location look-up asks for.
	LookupBatch int
	// RetryTimeout bounds how long a read, write or append keeps retrying
	// after failures (another replica, a fresh look-up, a new primary).
	RetryTimeout time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
	// Trace, when not nil, is told of the steps of reads, writes and
	// appends as they happen (trace.go); nil costs nothing.
	Trace *Trace
	// Clock is the time source for cache expiry and retry back-off; nil
	// means the real clock.
	Clock clock.Clock
	// MetaBatch is how many concurrent metadata calls (Stat, Create, Mkdir,
	// Remove, Rename, Chmod and the like) may share one request to the
	// master. A call made while earlier ones are in flight waits for the
	// next request; a lone call is sent at once. 1 sends every call alone;
	// 0 means the default.
	MetaBatch int
}

// DefaultConfig returns the defaults: umask 022, an 8 MiB write buffer and
// 16 MiB of writes in flight per file, locations
// cached for 30 s and looked up 16 chunks at a time, a 60 s retry budget, up
// to 256 metadata calls per request to the master, and the current
// process's user as the caller.
func DefaultConfig() Config {
	return Config{
		Caller:       processCaller(),
		Umask:        0o022,
		WriteBuffer:  8 << 20,
		WriteBehind:  16 << 20,
		LocationTTL:  30 * time.Second,
		LookupBatch:  16,
		RetryTimeout: 60 * time.Second,
		MetaBatch:    defaultMetaBatch,
	}
}

func processCaller() chunkfs.Caller {
	c := chunkfs.Caller{UID: uint32(os.Getuid()), GIDs: []uint32{uint32(os.Getgid())}}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if uint32(g) != c.GIDs[0] {
			c.GIDs = append(c.GIDs, uint32(g))
		}
	}
	return c
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Master == "":
		return errors.New("client config: Master address is empty")
	case slices.Contains(masterAddrs(c.Master), ""):
		return fmt.Errorf("client config: Master %q has an empty address", c.Master)
	case c.WriteBuffer < 0 || c.WriteBuffer > 256<<20:
		return fmt.Errorf("client config: WriteBuffer %d not in [0, 256 MiB]", c.WriteBuffer)
	case c.WriteBehind < 0 || c.WriteBehind > 1<<30:
		return fmt.Errorf("client config: WriteBehind %d not in [0, 1 GiB]", c.WriteBehind)
	case c.LocationTTL <= 0:
		return errors.New("client config: LocationTTL must be positive")
	case c.LookupBatch < 1 || c.LookupBatch > 1024:
		return fmt.Errorf("client config: LookupBatch %d not in [1, 1024]", c.LookupBatch)
	case c.MetaBatch < 0 || c.MetaBatch > maxMetaBatch:
		return fmt.Errorf("client config: MetaBatch %d not in [0, %d]", c.MetaBatch, maxMetaBatch)
	case c.AutoMsync < 0:
		return errors.New("client config: AutoMsync must not be negative")
	case c.RetryTimeout <= 0:
		return errors.New("client config: RetryTimeout must be positive")
	case c.Umask&^fs.ModePerm != 0:
		return fmt.Errorf("client config: Umask %o has bits beyond 0777", c.Umask)
	case len(c.Caller.GIDs) == 0:
		return errors.New("client config: Caller has no group")
	}
	return nil
}

// maxChunkSize bounds the chunk size a master may report.
const maxChunkSize = 4 << 30

// Client is a connection to a chunkfs cluster. It is safe for concurrent use
// by many goroutines; one Client per process is the usual pattern.
type Client struct {
	cfg        Config
	log        *slog.Logger
	clock      clock.Clock
	masterConn // the master's service (master_rpc.go)
	pool       *rpc.Pool
	data       *rpc.DataClient
	reader     chunkReader   // reads chunk data: data, but for unit tests
	suspects   suspects      // replicas that recently did not answer a read in time
	pace       readPace      // the rate its replica reads achieve, for their deadlines
	floor      time.Duration // least deadline of a read from a replica: replicaFloor
	locs       *locationCache
	leases     *leaseCache
	near       *nearness
	chunkSize  int64
	writerID   uint64        // random; first half of every record ID
	seq        atomic.Uint64 // record sequence numbers
	stateID    atomic.Uint64 // highest master state ID seen
	observers  atomic.Bool   // reads go to a group's observers
	lastSync   atomic.Int64  // clock time (UnixNano) of the last auto msync
}

// Dial connects to the master at addr with DefaultConfig.
func Dial(ctx context.Context, addr string) (*Client, error) {
	cfg := DefaultConfig()
	cfg.Master = addr
	return New(ctx, cfg)
}

// New connects to the cluster cfg names and learns its chunk size.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, chunkfs.E("dial", cfg.Master, chunkfs.KindInvalid, err.Error())
	}
	c := &Client{cfg: cfg, log: reqid.Logger(cfg.Logger), clock: cfg.Clock, pool: cfg.Security.NewPool(), data: cfg.Security.NewDataClient(), floor: replicaFloor}
	c.reader = c.data
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	c.near = newNearness()
	c.leases = newLeaseCache()
	c.writerID = randomUint64()
	batch := cfg.MetaBatch
	if batch == 0 {
		batch = defaultMetaBatch
	}
	first, set, err := c.dialMaster(cfg.Master, cfg.Caller, batch)
	if err != nil {
		c.Close()
		return nil, err
	}
	chunkSize, err := c.clusterInfoCall(ctx, first)
	if err != nil {
		c.Close()
		return nil, wrapOp("dial", cfg.Master, err)
	}
	if set != nil {
		// Any master of a group answers ClusterInfo, at its own state; an
		// msync goes to the leader: a new client sees every write
		// acknowledged before it, and its calls go to the leader first.
		if err := c.Msync(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	switch {
	case set != nil && cfg.LeaderReads:
		set.SetLeaderReads(true)
	case set != nil:
		c.findObservers(ctx, set)
	}
	c.lastSync.Store(c.clock.Now().UnixNano())
	if chunkSize < chunkfs.BlockSize || chunkSize > maxChunkSize {
		c.Close()
		return nil, chunkfs.E("dial", cfg.Master, chunkfs.KindOther, fmt.Sprintf("master reports an impossible chunk size %d", chunkSize))
	}
	c.chunkSize = chunkSize
	c.locs = newLocationCache(c, cfg.LocationTTL, cfg.LookupBatch)
	return c, nil
}

// findObservers asks the group which masters are observers and sends
// coordinated reads to them. A group that cannot say leaves every call
// with the leader.
func (c *Client) findObservers(ctx context.Context, set *rpc.MasterSet) {
	st, err := c.HAStatus(ctx)
	if err != nil {
		c.log.Warn("cannot learn the group's observers; reads go to the leader", "err", err)
		return
	}
	var readers []string
	for _, m := range st.Members {
		if !m.Voter {
			readers = append(readers, m.Addr)
		}
	}
	set.SetReaders(readers)
	c.observers.Store(len(readers) > 0)
}

// masterAddrs splits a comma-separated list of master addresses.
func masterAddrs(s string) []string {
	list := strings.Split(s, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	return list
}

// Close releases the client's connections. Files still open fail afterwards.
func (c *Client) Close() error {
	if c.data != nil {
		c.data.Close()
	}
	return c.pool.Close()
}

// ChunkSize returns the cluster's chunk size in bytes.
func (c *Client) ChunkSize() int64 { return c.chunkSize }

// MaxRecord returns the largest record payload Append accepts.
func (c *Client) MaxRecord() int {
	return int(chunkfs.MaxRecordSize(c.chunkSize)) - RecordHeaderSize
}

// observe raises the highest state ID seen to id.
func (c *Client) observe(id uint64) {
	for {
		cur := c.stateID.Load()
		if id <= cur || c.stateID.CompareAndSwap(cur, id) {
			return
		}
	}
}

// minState is the read-your-writes floor sent with reads.
func (c *Client) minState() uint64 { return c.stateID.Load() }

// nextRecordID returns a fresh record ID.
func (c *Client) nextRecordID() RecordID {
	var id RecordID
	binary.BigEndian.PutUint64(id[0:8], c.writerID)
	binary.BigEndian.PutUint64(id[8:16], c.seq.Add(1))
	return id
}

func randomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported systems
	}
	return binary.BigEndian.Uint64(b[:])
}

// wrapOp gives an error from the cluster the client's op and path when it
// has none, so every error names what failed.
func wrapOp(op, path string, err error) error {
	var e *chunkfs.Error
	if !errors.As(err, &e) {
		return &chunkfs.Error{Op: op, Path: path, Kind: chunkfs.KindOther, Err: err}
	}
	if e.Op == "" || e.Path == "" {
		c := *e
		if c.Op == "" {
			c.Op = op
		}
		if c.Path == "" {
			c.Path = path
		}
		return &c
	}
	return err
}
