package master

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/token"
)

// Chunk access tokens (HDFS block tokens). With Config.Tokens on, every
// chunk location a master hands out carries a token it signs (HMAC-SHA256)
// for the caller, the handle and the access (read from GetChunks,
// read|write from PrepareWrite); chunkservers refuse data and control
// requests without a valid one.
//
// The signing keys are part of the replicated state: the leader makes
// each key and logs it (a key command beside the namespace's commands, and
// a section of the checkpoint), so every master of a group, observers
// too, signs with the same keys and a chunkserver accepts a token from any
// of them. A key signs for TokenKeyPeriod; the leader logs the next key a
// whole period before it starts signing, so every chunkserver holds it
// (from its heartbeats) long before its first token. A key is accepted
// until its period plus TokenLifetime has passed: the previous key's
// tokens stay good until they expire.

// keyCommandTag starts a logged key command. A namespace command starts
// with its encoding version (1), so the two never meet.
const keyCommandTag = 0xC7

// keyCommandSize is the length of a key command: tag, ID, secret, end of
// its signing period and the time it was logged (Unix ms).
const keyCommandSize = 1 + 4 + 32 + 8 + 8

func isKeyCommand(cmd []byte) bool { return len(cmd) > 0 && cmd[0] == keyCommandTag }

func encodeKeyCommand(k token.Key, at time.Time) []byte {
	b := binary.BigEndian.AppendUint32([]byte{keyCommandTag}, k.ID)
	b = append(b, k.Secret[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(k.Until.UnixMilli()))
	return binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
}

var errBadKeyCommand = errors.New("master: malformed token key command")

// applyKeyLocked adds a logged key to the keyring, dropping keys whose
// tokens have all expired by the time it was logged.
func (s *state) applyKeyLocked(cmd []byte) error {
	if len(cmd) != keyCommandSize {
		return errBadKeyCommand
	}
	k := token.Key{ID: binary.BigEndian.Uint32(cmd[1:5])}
	copy(k.Secret[:], cmd[5:37])
	k.Until = time.UnixMilli(int64(binary.BigEndian.Uint64(cmd[37:45]))).UTC()
	at := time.UnixMilli(int64(binary.BigEndian.Uint64(cmd[45:53]))).UTC()
	s.keys.Add(k, at)
	s.keyID = max(s.keyID, k.ID)
	return nil
}

// keySectionMagic starts the checkpoint's key section, which precedes
// the namespace's own snapshot (itself starting "CFNS").
var keySectionMagic = []byte("CFTK\x01")

const keySize = 4 + 32 + 8

func encodeKeySection(keyID uint32, keys []token.Key) []byte {
	b := append([]byte(nil), keySectionMagic...)
	b = binary.BigEndian.AppendUint32(b, keyID)
	b = append(b, byte(len(keys)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, k.ID)
		b = append(b, k.Secret[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(k.Until.UnixMilli()))
	}
	return b
}

// decodeKeySection splits a checkpoint into its keys and the namespace's
// snapshot; one without a key section is the namespace's alone.
func decodeKeySection(b []byte) (keyID uint32, keys []token.Key, rest []byte, err error) {
	if len(b) < len(keySectionMagic) || string(b[:len(keySectionMagic)]) != string(keySectionMagic) {
		return 0, nil, b, nil
	}
	b = b[len(keySectionMagic):]
	if len(b) < 5 {
		return 0, nil, nil, errors.New("master: checkpoint: truncated token keys")
	}
	keyID, n := binary.BigEndian.Uint32(b), int(b[4])
	b = b[5:]
	if n > token.MaxKeys || len(b) < n*keySize {
		return 0, nil, nil, fmt.Errorf("master: checkpoint: bad token key section (%d keys)", n)
	}
	for range n {
		k := token.Key{ID: binary.BigEndian.Uint32(b)}
		copy(k.Secret[:], b[4:36])
		k.Until = time.UnixMilli(int64(binary.BigEndian.Uint64(b[36:44]))).UTC()
		keys = append(keys, k)
		b = b[keySize:]
	}
	return keyID, keys, b, nil
}

// signToken signs a token for uid on handle, with the key active at now.
func (s *state) signToken(handle chunkfs.Handle, access token.Access, uid uint32, now time.Time) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.keys.SignActive(uint64(handle), access, uid, now)
	if err != nil {
		return nil, err
	}
	return t.Encode(), nil
}

// heldKey is a token key as a chunkserver holds it: it accepts tokens
// signed with the key until expires.
type heldKey struct {
	id      uint32
	secret  [32]byte
	expires time.Time
}

// tokenKeys lists the keys whose tokens may still be valid at now, for
// chunkservers, each with when its last token expires.
func (s *state) tokenKeys(now time.Time) []heldKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []heldKey
	for _, k := range s.keys.Keys() {
		if exp := k.Until.Add(s.keys.TTL()); now.Before(exp) {
			out = append(out, heldKey{id: k.ID, secret: k.Secret, expires: exp})
		}
	}
	return out
}

// keyHorizon is the end of the last signing period logged, and the
// highest key ID ever logged.
func (s *state) keyHorizon() (time.Time, uint32) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var end time.Time
	for _, k := range s.keys.Keys() {
		if k.Until.After(end) {
			end = k.Until
		}
	}
	return end, s.keyID
}

// tokenClock is the clock of keys and tokens.
func (m *Master) tokenClock() clock.Clock {
	if m.cfg.TokenClock != nil {
		return m.cfg.TokenClock
	}
	return m.cfg.Clock
}

// keyCheckInterval is how often the leader checks that the next key is
// logged: a tenth of a period, at most a minute.
func (c Config) keyCheckInterval() time.Duration {
	return min(c.TokenKeyPeriod/10, time.Minute)
}

// keyLoop has the leader keep the keys logged ahead, until the master
// closes.
func (m *Master) keyLoop() {
	defer m.bg.Done()
	t := m.tokenClock().NewTicker(m.cfg.keyCheckInterval())
	defer t.Stop()
	for {
		m.rotateKeys()
		select {
		case <-m.stop:
			return
		case <-t.C():
		}
	}
}

// rotateKeys, on the leader, logs new keys until the signing periods
// logged reach a whole period past now: the key that signs now and the
// next one. A failure is logged; the next check tries again.
func (m *Master) rotateKeys() {
	if !m.cfg.tokensOn() || !m.leads() {
		return
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RPCTimeout)
	defer cancel()
	for {
		now := m.tokenClock().Now()
		end, id := m.state.keyHorizon()
		if end.After(now.Add(m.cfg.TokenKeyPeriod)) {
			return
		}
		if end.Before(now) {
			end = now
		}
		k, err := token.NewKey(id+1, rand.Reader, end.Add(m.cfg.TokenKeyPeriod))
		if err == nil {
			err = m.logKey(ctx, k, now)
		}
		if err != nil {
			m.cfg.Logger.Warn("token key not logged", "key", id+1, "err", err)
			return
		}
		m.cfg.Logger.Info("token key logged", "key", k.ID, "signs_until", k.Until)
	}
}

func (m *Master) logKey(ctx context.Context, k token.Key, now time.Time) error {
	res, _, err := m.log.Apply(ctx, encodeKeyCommand(k, now))
	if err != nil {
		return err
	}
	if err, ok := res.(error); ok {
		return err
	}
	return nil
}

// keysFor lists the token keys for a chunkserver's register or heartbeat
// answer; none when tokens are off.
func (m *Master) keysFor() []heldKey {
	if !m.cfg.tokensOn() {
		return nil
	}
	return m.state.tokenKeys(m.tokenClock().Now())
}
