package chunkstore

import "sync"

// syncGroup is the group commit of one data directory's Syncs: the Syncs
// that ask while one is under way wait for it to end and then share one
// sync of the whole file system (syncfs(2)), in place of an fsync of each
// chunk's data and metadata files. A Sync that finds no other one waiting
// with it fsyncs its own two files, as it would alone. Under a small-file
// load (every replica of every file is synced at its close) this turns
// tens of fsyncs, each a journal commit and a cache flush of the disk,
// into one.
//
// A shared sync that fails fails no one: each of its callers then fsyncs
// its own files, whose errors say which chunk did not reach the disk (a
// file system's sync reports a write-back error of any of its files).
type syncGroup struct {
	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond // signalled when a round ends
	running bool       // a round is under way
	round   uint64     // rounds started
	done    uint64     // rounds ended
	failed  uint64     // the last round that failed
	next    int        // callers waiting for the next round
}

func newSyncGroup() *syncGroup {
	g := &syncGroup{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// join returns once a round that started after the call has ended: with
// own's error if the caller was the round's only one (it runs own
// itself), with nil if all (run once for the round's callers) succeeded,
// and with own's error otherwise.
func (g *syncGroup) join(own, all func() error) error {
	g.mu.Lock()
	want := g.round + 1
	g.next++
	for g.done < want {
		if g.running {
			g.cond.Wait()
			continue
		}
		n := g.start()
		g.mu.Unlock()
		run := all
		if n == 1 {
			run = own
		}
		err := run()
		g.mu.Lock()
		g.end(err)
		if n == 1 {
			g.mu.Unlock()
			return err
		}
	}
	failed := g.failed >= want
	g.mu.Unlock()
	if failed {
		return own()
	}
	return nil
}

// start begins a round for the callers waiting and returns how many.
func (g *syncGroup) start() int {
	g.running = true
	g.round++
	n := g.next
	g.next = 0
	return n
}

// end ends the round under way, failed if err is not nil.
func (g *syncGroup) end(err error) {
	g.running = false
	g.done = g.round
	if err != nil {
		g.failed = g.round
	}
	g.cond.Broadcast()
}
