package token

import "time"

// Rotation. A master keeps the next key beside the one it signs with, so
// that the chunkservers hold it well before its first token: Active picks,
// of the keys whose signing period has not ended, the one that ends first.

// Active returns the key that signs at now, and false when no key's
// signing period lasts past now.
func (r *Keyring) Active(now time.Time) (Key, bool) {
	var best Key
	found := false
	for _, k := range r.keys {
		if now.Before(k.Until) && (!found || k.Until.Before(best.Until)) {
			best, found = k, true
		}
	}
	return best, found
}

// SignActive grants uid access to handle until now plus the keyring's
// lifetime, signed with the key Active picks at now.
func (r *Keyring) SignActive(handle uint64, access Access, uid uint32, now time.Time) (Token, error) {
	k, ok := r.Active(now)
	if !ok {
		return Token{}, ErrUnknownKey
	}
	return k.sign(handle, access, uid, now.Add(r.ttl)), nil
}

// SignUntil grants uid access to handle until expiry, signed with the
// newest key. A chunkserver uses it for its own calls to a peer (a clone
// pulling a replica) on a cluster without node certificates.
func (r *Keyring) SignUntil(handle uint64, access Access, uid uint32, expiry time.Time) (Token, error) {
	k, ok := r.Current()
	if !ok {
		return Token{}, ErrUnknownKey
	}
	return k.sign(handle, access, uid, expiry), nil
}

func (k *Key) sign(handle uint64, access Access, uid uint32, expiry time.Time) Token {
	t := Token{KeyID: k.ID, Handle: handle, Access: access, UID: uid, Expiry: expiry.Truncate(time.Millisecond).UTC()}
	t.MAC = k.mac(t.body())
	return t
}

// TTL is the lifetime of the tokens the keyring signs.
func (r *Keyring) TTL() time.Duration { return r.ttl }
