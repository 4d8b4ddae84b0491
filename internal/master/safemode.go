package master

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// Safe mode. After a start the master knows every chunk from its log but
// none of their locations: chunkservers report them as they register.
// Until at least SafeModeThreshold of the known chunks that hold committed
// data have a live replica reported (a chunk past its file's length may
// never have been placed: a crash between its allocation and its creation
// leaves it with no replica, and its next writer places it again), and at
// least safeModeServers chunkservers are live, the master creates no chunk
// (a chunk placed now would land on the few servers that happen to have
// registered, or on none) and plans no re-replication (every chunk looks
// under-replicated). Reads and writes to located chunks go on. It leaves
// this start-up safe mode by itself, once: later losses are healed by
// re-replication instead.
//
// An operator may also hold the master in safe mode (admin safemode enter)
// and end either (admin safemode leave), as hdfs dfsadmin -safemode: both
// are logged (namespace.OpSafeMode), so every master of a group and every
// restart keeps a hold, and a forced leave ends the start-up safe mode of
// every master started before it (a chunk lost for good keeps the located
// fraction under the threshold forever), not of one started after.

// heldReason is what safe mode waits for while an operator holds it.
const heldReason = "held by an operator; admin safemode leave ends it"

// checkSafeMode returns KindUnavailable, which clients retry within their
// deadline, while the master is in safe mode.
func (m *Master) checkSafeMode(op, p string) error {
	safe, why, _ := m.safeModeStatus()
	if !safe {
		return nil
	}
	return chunkfs.E(op, p, chunkfs.KindUnavailable, "master in safe mode ("+why+"); no chunk is created until it leaves; retry")
}

// safeModeStatus reports whether the master is in safe mode, why, and
// whether an operator holds it there.
func (m *Master) safeModeStatus() (safe bool, why string, held bool) {
	m.state.read(func(ns *namespace.Namespace) { held, _ = ns.SafeModeHeld() })
	if held {
		return true, heldReason, true
	}
	safe, why = m.startupSafeMode()
	return safe, why, false
}

// startupSafeMode reports whether the master is still in its start-up
// safe mode and what it waits for.
func (m *Master) startupSafeMode() (bool, string) {
	m.safeMu.Lock()
	defer m.safeMu.Unlock()
	return m.safe, m.safeWhy
}

// forcedOut reports whether an operator forced the masters out of safe
// mode after this one started.
func (m *Master) forcedOut() bool {
	var left int64
	m.state.read(func(ns *namespace.Namespace) { _, left = ns.SafeModeHeld() })
	return left > m.started.UnixNano()
}

// leaveStartup ends the start-up safe mode, if it is on, for why.
func (m *Master) leaveStartup(why string, args ...any) {
	m.safeMu.Lock()
	on := m.safe
	m.safe, m.safeWhy = false, ""
	if on {
		m.safeLeft = m.cfg.Clock.Now()
	}
	m.safeMu.Unlock()
	m.regMu.Lock()
	m.reg.stopCount()
	m.regMu.Unlock()
	if on {
		m.cfg.Logger.Info("left safe mode", append([]any{"why", why}, args...)...)
	}
}

// updateSafeMode leaves safe mode when enough chunks are located and
// enough servers live. It is called after each registration and on every
// repair tick (recount) while in safe mode. The located chunks are counted
// as replicas come and go (registry_safemode.go), from the chunks that
// hold data as the namespace stood when the count started: when a command
// has changed them since (chunkGen), a repair tick counts again from the
// namespace, a walk of every chunk, and a registration waits for it. The
// first call counts in any case.
func (m *Master) updateSafeMode(recount bool) {
	if safe, _ := m.startupSafeMode(); !safe {
		return
	}
	if m.forcedOut() {
		m.leaveStartup("forced by an operator")
		return
	}
	var total, located, live int
	var ok bool
	m.state.readChunks(func(ns *namespace.Namespace, gen uint64) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		live = len(m.reg.live())
		total, located, ok = m.reg.safeCounted(gen)
		if !ok && (recount || !m.reg.counting()) {
			m.reg.startCount(gen, wantedChunks(ns))
			total, located, ok = m.reg.safeCounted(gen)
		}
	})
	if !ok {
		return
	}
	if m.decideSafeMode(total, located, live) {
		m.leaveStartup("enough chunks located", "chunks", total, "located", located, "chunkservers", live) // also stops a count a racing call started
	}
}

// decideSafeMode records what safe mode waits for, given the chunks that
// hold data, how many of them are located and the live servers, and
// reports whether the master is out of it (left now or before).
func (m *Master) decideSafeMode(total, located, live int) bool {
	need := m.cfg.safeModeServers()
	var why string
	switch {
	case live < need:
		why = fmt.Sprintf("%d of at least %d chunkservers live", live, need)
	case total > 0 && float64(located) < m.cfg.SafeModeThreshold*float64(total):
		why = fmt.Sprintf("%d of %d chunks located, %.1f%% needed", located, total, 100*m.cfg.SafeModeThreshold)
	}
	m.safeMu.Lock()
	defer m.safeMu.Unlock()
	if !m.safe {
		return true
	}
	m.safeWhy = why
	return why == ""
}

// wantedChunks returns the chunks safe mode waits for, those that hold
// data (holdsData), with their logged versions.
func wantedChunks(ns *namespace.Namespace) map[chunkfs.Handle]chunkfs.Version {
	want := make(map[chunkfs.Handle]chunkfs.Version, ns.Counts().Chunks)
	size := ns.ChunkSize()
	ns.EachChunk(func(h chunkfs.Handle, v chunkfs.Version, _ int) {
		if holdsData(ns, h, size) {
			want[h] = v
		}
	})
	return want
}

// settling reports whether safe mode ended less than two heartbeat
// intervals before now. Safe mode ends once enough servers and chunks are
// known, typically while other chunkservers have still to notice (at
// their next heartbeat) that this master does not know them: their
// replicas look missing meanwhile, and re-replication planned then clones
// chunks that are not short of replicas at all (each trimmed again once
// the late servers report; in a fault campaign of 150 faults that was 174
// clones and as many trims). So repair waits out the re-registration.
func (m *Master) settling(now time.Time) bool {
	m.safeMu.Lock()
	defer m.safeMu.Unlock()
	return now.Sub(m.safeLeft) < 2*m.cfg.HeartbeatInterval
}

// holdsData reports whether chunk h holds committed bytes: it starts
// before its file's length. A chunk past it may legitimately have no
// replica (a crash between its allocation and its creation, or a
// creation that failed), and its next writer places it again, so it is
// neither missing nor waited for.
func holdsData(ns *namespace.Namespace, h chunkfs.Handle, size int64) bool {
	idx, length, _, _, ok := ns.ChunkFile(h)
	return ok && idx*size < length
}

// logSafeMode logs an operator's enter or leave; after a leave this
// master also leaves its start-up safe mode straight away.
func (m *Master) logSafeMode(ctx context.Context, enter bool) error {
	cmd := &namespace.Command{Op: namespace.OpSafeMode}
	if enter {
		cmd.Flags = namespace.FlagSafeModeEnter
	}
	if _, _, err := m.apply(ctx, cmd); err != nil {
		return err
	}
	if enter {
		m.cfg.Logger.Warn("safe mode entered by an operator: no chunk is created, nothing re-replicated, until admin safemode leave")
		return nil
	}
	m.leaveStartup("forced by an operator")
	m.cfg.Logger.Warn("safe mode left by an operator")
	return nil
}
