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
type tokenKeys struct {
	mu   sync.Mutex     // guards ring
	ring *token.Keyring // lifetime 0: each key's Until is when it expires
}

func newTokenKeys() *tokenKeys { return &tokenKeys{ring: token.NewKeyring(0)} }

// learn adds the keys of a master's answer not held yet; expired ones
// are dropped.
func (k *tokenKeys) learn(keys []token.Key, now time.Time) {
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
		}
	}
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

// learnKeys takes the token keys of a master's answer.
func (s *Server) learnKeys(keys []token.Key) {
	if len(keys) > 0 {
		s.keys.learn(keys, s.tokenClock().Now())
	}
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
	}
	if err != nil {
		return tokenRefusal(op, h, err)
	}
	return nil
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
