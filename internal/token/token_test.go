package token

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func keyring(t *testing.T, ids ...uint32) *Keyring {
	t.Helper()
	r := NewKeyring(10 * time.Minute)
	for _, id := range ids {
		k, err := NewKey(id, strings.NewReader(strings.Repeat(string(rune('a'+id)), 32)), t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		r.Add(k, t0)
	}
	return r
}

func TestSignVerify(t *testing.T) {
	r := keyring(t, 1)
	tok, err := r.Sign(42, Read, 1000, t0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(tok.Encode())
	if err != nil || back != tok {
		t.Fatalf("Decode(Encode()) = %+v, %v; want %+v", back, err, tok)
	}
	if err := r.Verify(back, 42, Read, t0.Add(time.Minute)); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	cases := []struct {
		name   string
		handle uint64
		want   Access
		at     time.Time
		mutate func(*Token)
		err    error
	}{
		{"expired", 42, Read, t0.Add(10 * time.Minute), nil, ErrExpired},
		{"another chunk", 43, Read, t0, nil, ErrWrongChunk},
		{"write with a read token", 42, Write, t0, nil, ErrAccess},
		{"forged handle", 43, Read, t0, func(t *Token) { t.Handle = 43 }, ErrForged},
		{"forged access", 42, Write, t0, func(t *Token) { t.Access = Read | Write }, ErrForged},
		{"forged expiry", 42, Read, t0.Add(time.Hour), func(t *Token) { t.Expiry = t0.Add(2 * time.Hour) }, ErrForged},
		{"flipped MAC", 42, Read, t0, func(t *Token) { t.MAC[0] ^= 1 }, ErrForged},
		{"unknown key", 42, Read, t0, func(t *Token) { t.KeyID = 9 }, ErrUnknownKey},
	}
	for _, c := range cases {
		tk := tok
		if c.mutate != nil {
			c.mutate(&tk)
		}
		if err := r.Verify(tk, c.handle, c.want, c.at); !errors.Is(err, c.err) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.err)
		}
	}
}

func TestRotationAcceptsThePreviousKey(t *testing.T) {
	master := keyring(t, 1)
	old, _ := master.Sign(7, Write, 0, t0)
	k2, _ := NewKey(2, bytes.NewReader(bytes.Repeat([]byte{2}, 32)), t0.Add(2*time.Hour))
	master.Add(k2, t0.Add(time.Minute))
	fresh, _ := master.Sign(7, Write, 0, t0.Add(time.Minute))
	if fresh.KeyID != 2 {
		t.Fatalf("after rotation signs with key %d, want 2", fresh.KeyID)
	}
	cs := NewKeyring(10 * time.Minute) // a chunkserver given the master's keys
	for _, k := range master.Keys() {
		cs.Add(k, t0.Add(time.Minute))
	}
	for _, tk := range []Token{old, fresh} {
		if err := cs.Verify(tk, 7, Write, t0.Add(2*time.Minute)); err != nil {
			t.Fatalf("token of key %d after rotation: %v", tk.KeyID, err)
		}
	}
	// Once key 1 has stopped signing and its last tokens expired, it goes.
	k3, _ := NewKey(3, bytes.NewReader(bytes.Repeat([]byte{3}, 32)), t0.Add(3*time.Hour))
	cs.Add(k3, t0.Add(time.Hour+10*time.Minute))
	for _, k := range cs.Keys() {
		if k.ID == 1 {
			t.Fatal("key 1 kept after its tokens expired")
		}
	}
	if err := cs.Verify(old, 7, Write, t0.Add(time.Hour+10*time.Minute)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of a dropped key: %v", err)
	}
}

func TestKeyringBounds(t *testing.T) {
	r := NewKeyring(time.Minute)
	if _, err := r.Sign(1, Read, 0, t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Sign with no key: %v", err)
	}
	for i := range uint32(MaxKeys + 5) {
		k, _ := NewKey(i+1, bytes.NewReader(make([]byte, 32)), t0.Add(time.Hour))
		r.Add(k, t0)
	}
	if n := len(r.Keys()); n != MaxKeys {
		t.Fatalf("holds %d keys, want at most %d", n, MaxKeys)
	}
	if _, err := NewKey(1, bytes.NewReader(nil), t0); err == nil {
		t.Fatal("NewKey with no randomness succeeded")
	}
}

func FuzzDecode(f *testing.F) {
	r := NewKeyring(time.Minute)
	k, _ := NewKey(1, bytes.NewReader(make([]byte, 32)), t0.Add(time.Hour))
	r.Add(k, t0)
	tok, _ := r.Sign(5, Read|Write, 3, t0)
	f.Add(tok.Encode())
	f.Add([]byte{})
	f.Add(make([]byte, Size))
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(tk.Encode(), b) {
			t.Fatalf("token %+v does not re-encode to its input", tk)
		}
		if err := r.Verify(tk, tk.Handle, tk.Access, t0); err == nil && !bytes.Equal(b, tok.Encode()) {
			t.Fatalf("a token the master never signed verifies: %x", b)
		}
	})
}

func TestActiveKey(t *testing.T) {
	r := NewKeyring(time.Hour)
	for id, until := range map[uint32]time.Time{1: t0.Add(time.Hour), 2: t0.Add(2 * time.Hour)} {
		r.Add(Key{ID: id, Until: until, Secret: [32]byte{byte(id)}}, t0)
	}
	for _, c := range []struct {
		at time.Duration
		id uint32
	}{{0, 1}, {59 * time.Minute, 1}, {time.Hour, 2}, {119 * time.Minute, 2}} {
		tok, err := r.SignActive(7, Read, 1, t0.Add(c.at))
		if err != nil || tok.KeyID != c.id {
			t.Fatalf("at +%v: key %d, %v; want key %d", c.at, tok.KeyID, err, c.id)
		}
		if err := r.Verify(tok, 7, Read, t0.Add(c.at+59*time.Minute)); err != nil {
			t.Fatalf("at +%v: %v", c.at, err)
		}
	}
	if _, err := r.SignActive(7, Read, 1, t0.Add(2*time.Hour)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("no key signs after the last one's period: %v", err)
	}
	tok, err := r.SignUntil(7, Write, 1, t0.Add(time.Minute))
	if err != nil || tok.KeyID != 2 || r.Verify(tok, 7, Write, t0) != nil {
		t.Fatalf("SignUntil: %+v, %v", tok, err)
	}
}
