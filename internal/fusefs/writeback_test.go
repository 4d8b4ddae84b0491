package fusefs

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// TestFileGenerations drives the generation table through the kernel's
// sequences: a change on the cluster makes a new generation at lookup, an
// open of a stale inode is refused (ESTALE) and the kernel's retry within
// the window is accepted, opens on this mount share the inode, and this
// mount's own pushes keep its cache.
func TestFileGenerations(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	tab := newFiles(clk)
	at := func(size int64, sec int64) *chunkfs.FileInfo {
		return &chunkfs.FileInfo{Inode: 7, Length: size, MTime: time.Unix(sec, 0)}
	}
	v1, v2, v3 := at(10, 1), at(20, 2), at(30, 3)

	g1 := tab.lookedUp(v1)
	if g := tab.lookedUp(v1); g != g1 {
		t.Fatalf("unchanged file: lookup gave generation %d, then %d", g1, g)
	}
	if keep, stale := tab.opened(7, g1, versionOf(v1), true); !keep || stale {
		t.Fatalf("open of the current version: keep %v stale %v, want keep", keep, stale)
	}
	// Open for writing on this mount: another mount's change does not
	// split the inode.
	if g := tab.lookedUp(v2); g != g1 {
		t.Fatalf("lookup while open gave new generation %d", g)
	}
	if keep, stale := tab.opened(7, g1, versionOf(v2), false); !keep || stale {
		t.Fatalf("second open while open: keep %v stale %v, want shared", keep, stale)
	}
	tab.closed(7, true)
	// A reader alone still counted (its release comes after close(2)
	// returned) does not hold the changed file's old pages for the next
	// open: refused, and the lookup makes a new generation.
	if _, stale := tab.opened(7, g1, versionOf(v2), false); !stale {
		t.Fatal("open of a changed file beside an open reader was not refused")
	}
	if g := tab.lookedUp(v2); g == g1 {
		t.Fatal("lookup beside an open reader kept the old generation")
	}
	tab.closed(7, false)
	g1 = tab.lookedUp(v1) // back to v1 (as if rewritten): a generation for it
	tab.byIno[7].estaleGen = 0

	// Closed, and the cluster changed: the open is refused...
	if _, stale := tab.opened(7, g1, versionOf(v2), false); !stale {
		t.Fatal("open of a changed file was not refused")
	}
	// ...the retry's lookup makes a new generation, and its open is taken.
	g2 := tab.lookedUp(v2)
	if g2 == g1 {
		t.Fatal("lookup after a refused open kept the old generation")
	}
	if keep, stale := tab.opened(7, g2, versionOf(v2), false); !keep || stale {
		t.Fatalf("retry's open: keep %v stale %v", keep, stale)
	}
	tab.closed(7, false)

	// The kernel forgets a generation only after the retry window.
	if _, stale := tab.opened(7, g2, versionOf(v3), false); !stale {
		t.Fatal("open of a changed file was not refused")
	}
	g3 := tab.lookedUp(v3)
	tab.forgot(7, g3)
	if tab.byIno[7] == nil {
		t.Fatal("state forgotten inside the retry window")
	}
	clk.Advance(retryWindow + time.Second)
	tab.forgot(7, g3)
	if tab.byIno[7] != nil {
		t.Fatal("state kept after the retry window")
	}

	// This mount's own write: the version it pushed is what its inode holds.
	g := tab.lookedUp(v1)
	tab.opened(7, g, versionOf(v1), true)
	tab.wrote(7, g, versionOf(v2))
	tab.closed(7, true)
	if keep, stale := tab.opened(7, g, versionOf(v2), false); !keep || stale {
		t.Fatalf("reopen after own write: keep %v stale %v, want keep", keep, stale)
	}
}
