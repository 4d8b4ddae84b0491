package master

import (
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

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
