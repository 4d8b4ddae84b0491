package master

import (
	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// signLocations puts a token for uid with access on every location, when
// tokens are on. Without a key yet (a new leader has not logged one) the
// call is refused as unavailable, and the client retries.
func (m *Master) signLocations(op, path string, access token.Access, uid uint32, locs ...*pb.ChunkLocation) error {
	if !m.cfg.tokensOn() {
		return nil
	}
	now := m.tokenClock().Now()
	for _, loc := range locs {
		tok, err := m.state.signToken(chunkfs.Handle(loc.Handle), access, uid, now)
		if err != nil {
			return chunkfs.E(op, path, chunkfs.KindUnavailable, "no chunk access token key yet; retry")
		}
		loc.Token = tok
	}
	return nil
}

// keysTo is the token keys on the wire.
func keysTo(keys []heldKey) []*pb.TokenKey {
	if keys == nil {
		return nil
	}
	out := make([]*pb.TokenKey, len(keys))
	for i, k := range keys {
		out[i] = &pb.TokenKey{Id: k.id, Secret: append([]byte(nil), k.secret[:]...), ExpiresUnixMs: k.expires.UnixMilli()}
	}
	return out
}
