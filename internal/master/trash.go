package master

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs/internal/namespace"
)

// The trash (namespace/trash.go) is the namespace's: a delete logs
// OpTrash, which keeps what it removes, chunks and all, until the grace
// period passes. The master's part is to log its configured period when
// it takes the lead, to purge what is due on its own clock (trashLoop),
// and to answer the trash calls.

// logTrashPeriod logs the configured grace period if the namespace has
// another: the leader's configuration wins, and every replica applies it.
func (m *Master) logTrashPeriod(ctx context.Context) error {
	var have int64
	m.state.read(func(ns *namespace.Namespace) { have = ns.TrashPeriod() })
	want := m.cfg.TrashPeriod.Nanoseconds()
	if have == want {
		return nil
	}
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpTrashPeriod, Length: want}); err != nil {
		return err
	}
	m.cfg.Logger.Info("trash period set", "period", m.cfg.TrashPeriod, "was", time.Duration(have))
	return nil
}

// trashLoop purges, on the leader, the trash entries whose grace period
// has passed by the master's clock. It looks every TrashInterval, or every
// grace period when that is shorter: an entry outlives its period by at
// most one look. A single master also looks once at its start, and a new
// leader once it leads (takeOver): one restarted, or a leadership moved,
// more often than it looks would otherwise never purge.
func (m *Master) trashLoop() {
	defer m.bg.Done()
	every := m.cfg.TrashInterval
	if p := m.cfg.TrashPeriod; p > 0 && p < every {
		every = p
	}
	t := m.cfg.Clock.NewTicker(every)
	defer t.Stop()
	if m.leads() {
		m.purgeDue() // what fell due while no master ran, or while one restarted
	}
	for {
		select {
		case <-m.stop:
			return
		case <-t.C():
			if m.leads() {
				m.purgeDue()
			}
		}
	}
}

// purgeDue logs purges while some entry is due, each freeing at most
// namespace.MaxPurge entries, and queues the chunks they free.
func (m *Master) purgeDue() {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RPCTimeout)
	defer cancel()
	for {
		now := m.cfg.Clock.Now().UnixNano()
		var due bool
		m.state.read(func(ns *namespace.Namespace) { due = ns.TrashDue(now) })
		if !due {
			return
		}
		r, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpPurgeTrash})
		if err != nil {
			m.cfg.Logger.Warn("purging the trash failed", "err", err)
			return
		}
		m.collect(r.Garbage)
		m.cfg.Logger.Info("trash purged", "chunks", len(r.Garbage))
	}
}
