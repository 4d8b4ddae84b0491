// Package token makes and checks chunk access tokens, as HDFS block tokens
// are: the master signs, with HMAC-SHA256 under a key it shares with the
// chunkservers, a token naming one chunk handle, the access it grants
// (read, write), the user it was granted to and an expiry; a chunkserver
// serves a data or control request only with a valid token for that handle
// and access.
//
// Keys rotate: a Keyring signs with its newest key and accepts any key it
// still holds, so a chunkserver keeps the previous key until the tokens
// signed with it have expired. The package is pure: time comes in as a
// value, randomness as an io.Reader.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Access is what a token lets its holder do to a chunk.
type Access uint8

// Access bits.
const (
	Read  Access = 1
	Write Access = 2
)

// Token is a signed grant of access to one chunk.
type Token struct {
	KeyID  uint32 // the key that signed it
	Handle uint64
	Access Access
	UID    uint32    // the user it was granted to (logged by chunkservers)
	Expiry time.Time // millisecond precision
	MAC    [sha256.Size]byte
}

// Size is the length of an encoded token.
const Size = 1 + 4 + 8 + 1 + 4 + 8 + sha256.Size

const version = 1

// Errors of Verify and Decode. None of them says anything about the chunk.
var (
	ErrMalformed  = errors.New("token malformed")
	ErrUnknownKey = errors.New("token signed with an unknown key")
	ErrForged     = errors.New("token signature invalid")
	ErrExpired    = errors.New("token expired")
	ErrWrongChunk = errors.New("token is for another chunk")
	ErrAccess     = errors.New("token does not grant this access")
)

// body is what the MAC covers: every field but the MAC.
func (t *Token) body() []byte {
	b := make([]byte, 0, Size-sha256.Size)
	b = append(b, version)
	b = binary.BigEndian.AppendUint32(b, t.KeyID)
	b = binary.BigEndian.AppendUint64(b, t.Handle)
	b = append(b, byte(t.Access))
	b = binary.BigEndian.AppendUint32(b, t.UID)
	return binary.BigEndian.AppendUint64(b, uint64(t.Expiry.UnixMilli()))
}

// Encode returns the token's wire form, Size bytes.
func (t *Token) Encode() []byte { return append(t.body(), t.MAC[:]...) }

// Decode parses a token's wire form; it does not verify it.
func Decode(b []byte) (Token, error) {
	if len(b) != Size || b[0] != version {
		return Token{}, ErrMalformed
	}
	t := Token{
		KeyID:  binary.BigEndian.Uint32(b[1:5]),
		Handle: binary.BigEndian.Uint64(b[5:13]),
		Access: Access(b[13]),
		UID:    binary.BigEndian.Uint32(b[14:18]),
		Expiry: time.UnixMilli(int64(binary.BigEndian.Uint64(b[18:26]))).UTC(),
	}
	if t.Access == 0 || t.Access&^(Read|Write) != 0 {
		return Token{}, ErrMalformed
	}
	copy(t.MAC[:], b[26:])
	return t, nil
}

// Key is one signing key.
type Key struct {
	ID     uint32
	Secret [32]byte
	// Until is when the key stops signing; it is accepted until Until plus
	// the longest token lifetime.
	Until time.Time
}

// NewKey makes a key with a secret read from rand.
func NewKey(id uint32, rand io.Reader, until time.Time) (Key, error) {
	k := Key{ID: id, Until: until}
	if _, err := io.ReadFull(rand, k.Secret[:]); err != nil {
		return Key{}, fmt.Errorf("token: key secret: %w", err)
	}
	return k, nil
}

func (k *Key) mac(body []byte) [sha256.Size]byte {
	h := hmac.New(sha256.New, k.Secret[:])
	h.Write(body)
	var m [sha256.Size]byte
	copy(m[:], h.Sum(nil))
	return m
}

// Keyring holds the keys a process signs with or accepts. It is not safe
// for concurrent use; its owner guards it.
type Keyring struct {
	keys []Key // oldest first; the last signs
	ttl  time.Duration
}

// MaxKeys bounds the keys a Keyring holds.
const MaxKeys = 16

// NewKeyring returns an empty keyring whose tokens live for ttl.
func NewKeyring(ttl time.Duration) *Keyring { return &Keyring{ttl: ttl} }

// Add adds k as the newest key (replacing a key of the same ID) and drops
// keys that can no longer have valid tokens at now, and the oldest beyond
// MaxKeys.
func (r *Keyring) Add(k Key, now time.Time) {
	kept := r.keys[:0]
	for _, old := range r.keys {
		if old.ID != k.ID && now.Before(old.Until.Add(r.ttl)) {
			kept = append(kept, old)
		}
	}
	r.keys = append(kept, k)
	if len(r.keys) > MaxKeys {
		r.keys = r.keys[len(r.keys)-MaxKeys:]
	}
}

// Keys returns the keys held, oldest first (for handing to chunkservers).
func (r *Keyring) Keys() []Key { return append([]Key(nil), r.keys...) }

// Current returns the signing key (the one whose period ends last), and
// false when there is none.
func (r *Keyring) Current() (Key, bool) {
	if len(r.keys) == 0 {
		return Key{}, false
	}
	cur := r.keys[len(r.keys)-1]
	for _, k := range r.keys { // the newest by its period, whatever order keys came in
		if k.Until.After(cur.Until) {
			cur = k
		}
	}
	return cur, true
}

// Sign grants uid access to handle until now plus the keyring's lifetime.
func (r *Keyring) Sign(handle uint64, access Access, uid uint32, now time.Time) (Token, error) {
	k, ok := r.Current()
	if !ok {
		return Token{}, ErrUnknownKey
	}
	t := Token{KeyID: k.ID, Handle: handle, Access: access, UID: uid, Expiry: now.Add(r.ttl).Truncate(time.Millisecond).UTC()}
	t.MAC = k.mac(t.body())
	return t, nil
}

// Verify checks that t is a valid token, at now, for want on handle.
func (r *Keyring) Verify(t Token, handle uint64, want Access, now time.Time) error {
	var key *Key
	for i := range r.keys {
		if r.keys[i].ID == t.KeyID {
			key = &r.keys[i]
		}
	}
	if key == nil {
		return ErrUnknownKey
	}
	if m := key.mac(t.body()); !hmac.Equal(m[:], t.MAC[:]) {
		return ErrForged
	}
	switch {
	case !now.Before(t.Expiry):
		return ErrExpired
	case t.Handle != handle:
		return ErrWrongChunk
	case t.Access&want != want:
		return ErrAccess
	}
	return nil
}
