package chunkserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/token"
)

// Authorisation (always on a secure cluster; Config.RequireTokens on plain
// TCP). A client's request names a chunk
// and carries the chunk access token the master signed for it: data-stream
// reads need read access to the handle read; pushes, Write, Append,
// Reserve and Sync write access (a push's token is checked on its own
// handle: a push names no chunk); ChunkInfo read access. Calls only nodes
// make (Lease, Truncate, DeleteChunks and Clone from a master, Apply from
// a primary) are authorised by the caller's certificate: its role must be
// master or chunkserver. A node may also go without a token on the calls
// that take one. On plain TCP there is no certificate: node calls are
// accepted, and a chunkserver's own calls to a peer (a clone's reads, a
// forwarded Sync or push) carry a token, the client's or one it signs
// itself with the keys it holds. Tokens on plain TCP thus guard chunks
// from clients that have no token; they cannot tell a client from a node.
//
// The keys come from every master's register and heartbeat answers; a key
// is accepted until it expires (its last token's expiry), so a previous
// key stays good until its tokens have expired.

// tokenKeys holds the token keys a chunkserver accepts.
//
// A token of a key newer than any held (a cluster just started, whose
// leader logged its first key after this server registered, or a lost
// heartbeat) makes the server ask every master for its keys at once
// (wanted wakes the heartbeat loops) and wait until it holds the key,
// every master has answered a heartbeat sent after the ask, or keyWait
// has passed: instead of refusing the request, after which the client
// would push its data again, in vain until the next heartbeat. At most one
// ask per keyAskGap, so tokens naming made-up keys cost the masters
// nothing more.
type tokenKeys struct {
	mu       sync.Mutex        // guards the fields below
	ring     *token.Keyring    // lifetime 0: each key's Until is when it expires
	newest   uint32            // the highest key ID learnt
	asks     uint64            // asks so far
	asked    time.Time         // when the last ask was made
	answered map[string]uint64 // by master: asks made before its last answered heartbeat was sent
	answers  chan struct{}     // closed (and replaced) at each master's answer
	want     chan struct{}     // closed (and replaced) to ask the masters for keys
	wait     time.Duration     // keyWait; tests that must tell an answer from the bound lengthen it
}

// setWait sets the bound of a request's wait for keys (keyWait).
func (k *tokenKeys) setWait(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.wait = d
}

// keyWait bounds the wait of a request for the keys it asked for (the
// masters are down); keyAskGap is the least time between two asks.
const (
	keyWait   = 2 * time.Second
	keyAskGap = time.Second
)

func newTokenKeys() *tokenKeys {
	return &tokenKeys{ring: token.NewKeyring(0), answered: map[string]uint64{},
		answers: make(chan struct{}), want: make(chan struct{}), wait: keyWait}
}

// wanted is closed when a request needs keys not held: each heartbeat
// loop then heartbeats at once.
func (k *tokenKeys) wanted() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.want
}

// sending is called as a register or heartbeat is sent; it returns the
// asks it answers, for learn.
func (k *tokenKeys) sending() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.asks
}

// ask asks the masters for keys when id is newer than any held; it
// returns the ask's number, or 0 when id is not worth waiting for (an old
// key). Within keyAskGap of the last ask it asks nothing more and returns
// that ask's number: requests that came together wait for one answer.
func (k *tokenKeys) ask(id uint32, now time.Time) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id <= k.newest {
		return 0
	}
	if k.asks > 0 && now.Sub(k.asked) < keyAskGap {
		return k.asks
	}
	k.asks++
	k.asked = now
	close(k.want)
	k.want = make(chan struct{})
	return k.asks
}

// waitState reports whether key id is held (or a newer one: an older key
// not held is not coming) and whether every one of masters has answered
// ask; else it returns the channel closed at the next answer.
func (k *tokenKeys) waitState(id uint32, ask uint64, masters []string) (held, answered bool, next <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	answered = true
	for _, m := range masters {
		if k.answered[m] < ask {
			answered = false
		}
	}
	return id <= k.newest, answered, k.answers
}

// learn adds the keys of master's answer not held yet (expired ones are
// dropped); asks is what sending returned as the request went.
func (k *tokenKeys) learn(master string, asks uint64, keys []token.Key, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	held := make(map[uint32]token.Key)
	for _, h := range k.ring.Keys() {
		held[h.ID] = h
	}
	for _, key := range keys {
		if !now.Before(key.Until) {
			continue
		}
		if held[key.ID] != key {
			k.ring.Add(key, now)
			k.newest = max(k.newest, key.ID)
		}
	}
	k.answered[master] = max(k.answered[master], asks)
	close(k.answers)
	k.answers = make(chan struct{})
}

func (k *tokenKeys) verify(t token.Token, h chunkfs.Handle, want token.Access, now time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ring.Verify(t, uint64(h), want, now)
}

// sign makes a token for this server's own call to a peer, valid until
// expiry; nil when it holds no key.
func (k *tokenKeys) sign(h chunkfs.Handle, access token.Access, expiry time.Time) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, err := k.ring.SignUntil(uint64(h), access, nodeUID, expiry)
	if err != nil {
		return nil
	}
	return t.Encode()
}

// nodeUID is the user named in the tokens a chunkserver signs for itself.
const nodeUID = 1<<32 - 1

// tokenClock is the clock of keys and tokens.
func (s *Server) tokenClock() clock.Clock {
	if s.cfg.TokenClock != nil {
		return s.cfg.TokenClock
	}
	return s.cfg.Clock
}

// learnKeys takes the token keys of master's answer to a register or
// heartbeat sent when s.keys.sending returned asks.
func (s *Server) learnKeys(master string, asks uint64, keys []token.Key) {
	s.keys.learn(master, asks, keys, s.tokenClock().Now())
}

// peerToken is the token this server's call to a peer about h carries:
// one it signs itself, when tokens are required.
func (s *Server) peerToken(h chunkfs.Handle, access token.Access) []byte {
	if !s.cfg.requireTokens() {
		return nil
	}
	return s.keys.sign(h, access, s.tokenClock().Now().Add(s.cfg.RPCTimeout))
}

// checkToken verifies tok for access want to chunk h; op names the
// request in the refusal. A push passes h 0: its token's own handle.
func (s *Server) checkToken(op string, h chunkfs.Handle, tok []byte, want token.Access) error {
	if len(tok) == 0 {
		return refusal(op, h, "permission denied: no chunk access token")
	}
	t, err := token.Decode(tok)
	if err == nil {
		if h == 0 {
			h = chunkfs.Handle(t.Handle)
		}
		err = s.keys.verify(t, h, want, s.tokenClock().Now())
		if errors.Is(err, token.ErrUnknownKey) && s.awaitKey(t.KeyID) {
			err = s.keys.verify(t, h, want, s.tokenClock().Now())
		}
	}
	if err != nil {
		return tokenRefusal(op, h, err)
	}
	return nil
}

// awaitKey asks the masters for the keys when key id is newer than any
// held, and waits for it (tokenKeys); it reports whether the key is held
// then.
func (s *Server) awaitKey(id uint32) bool {
	ask := s.keys.ask(id, s.cfg.Clock.Now())
	if ask == 0 {
		return false
	}
	s.keys.mu.Lock()
	wait := s.keys.wait
	s.keys.mu.Unlock()
	timeout := time.NewTimer(wait) // a bound, not a schedule: real time
	defer timeout.Stop()
	for {
		held, answered, next := s.keys.waitState(id, ask, s.cfg.Masters)
		if held || answered {
			return held
		}
		select {
		case <-next:
		case <-timeout.C:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
}

// tokenRefusal is the one-line answer to a bad token. An expired token or
// one of a key not held yet is KindStale: the client asks the master for
// the chunk again and retries with a fresh token. Any other is refused.
func tokenRefusal(op string, h chunkfs.Handle, err error) error {
	switch {
	case errors.Is(err, token.ErrExpired):
		return &chunkfs.Error{Op: op, Path: chunkName(h), Kind: chunkfs.KindStale, Err: err}
	case errors.Is(err, token.ErrUnknownKey):
		return &chunkfs.Error{Op: op, Path: chunkName(h), Kind: chunkfs.KindStale, Err: err}
	case errors.Is(err, token.ErrWrongChunk):
		return refusal(op, h, "permission denied: token for another chunk")
	case errors.Is(err, token.ErrAccess):
		return refusal(op, h, "permission denied: token does not grant this access")
	}
	return refusal(op, h, "permission denied: invalid chunk access token")
}

func refusal(op string, h chunkfs.Handle, msg string) error {
	return chunkfs.E(op, chunkName(h), chunkfs.KindPermission, msg)
}

// authorize checks a client's call about chunk h: a valid token with
// access want, or a node's certificate and no token.
func (s *Server) authorize(ctx context.Context, op string, h chunkfs.Handle, tok []byte, want token.Access) error {
	if !s.cfg.requireTokens() {
		return nil
	}
	if id, ok := rpc.PeerIdentity(ctx); ok && id.Role.Node() && len(tok) == 0 {
		return nil
	}
	return s.checkToken(op, h, tok, want)
}

// nodeOnly checks a call only nodes make: the caller's certificate must
// be a master's or a chunkserver's (on plain TCP there is none to check).
func (s *Server) nodeOnly(ctx context.Context, op string, h chunkfs.Handle) error {
	if !s.cfg.requireTokens() {
		return nil
	}
	if id, ok := rpc.PeerIdentity(ctx); ok && !id.Role.Node() {
		return refusal(op, h, "permission denied: only masters and chunkservers make this call")
	}
	return nil
}

// enterNode admits a call only masters and chunkservers make.
func (s *Server) enterNode(ctx context.Context, op string, h chunkfs.Handle) (done func(), err error) {
	return s.admit(func() error { return s.nodeOnly(ctx, op, h) })
}

// enterClient admits a client's call about chunk h, which needs access want.
func (s *Server) enterClient(ctx context.Context, op string, h chunkfs.Handle, tok []byte, want token.Access) (done func(), err error) {
	return s.admit(func() error { return s.authorize(ctx, op, h, tok, want) })
}

// authorizeStream is the data stream's Authorize: a read needs read
// access to its chunk, a push write access; a node's connection may go
// without a token.
func (s *Server) authorizeStream(r rpc.StreamRequest) error {
	if !s.cfg.requireTokens() {
		return nil
	}
	if len(r.Token) == 0 && nodeConn(r.Conn) {
		return nil
	}
	if r.Push {
		return s.checkToken("push", 0, r.Token, token.Write)
	}
	return s.checkToken("read", r.Handle, r.Token, token.Read)
}

func nodeConn(c net.Conn) bool {
	id, ok := rpc.ConnIdentity(c)
	return ok && id.Role.Node()
}
