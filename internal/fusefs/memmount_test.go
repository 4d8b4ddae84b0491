package fusefs

import (
	"testing"
	"time"
)

// TestPOSIXMemory runs the POSIX suites on the FUSE layer over the
// in-memory backend, with every cache on, with --async-close too, with
// the small-file row's options (--async-close, --async-create and a
// negative timeout, which answers look-ups from the names the mount
// knows: knowndirs.go) and with --no-cache.
func TestPOSIXMemory(t *testing.T) {
	t.Run("cached", func(t *testing.T) {
		runPOSIX(t, mountT(t, newMemBackend(), DefaultConfig()))
	})
	t.Run("async-close", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AsyncClose = 16
		runPOSIX(t, mountT(t, newMemBackend(), cfg))
	})
	t.Run("async-create", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AsyncClose, cfg.AsyncCreate, cfg.NegativeTimeout = 16, 64, time.Second
		runPOSIX(t, mountT(t, newMemBackend(), cfg))
	})
	t.Run("nocache", func(t *testing.T) {
		runPOSIX(t, mountT(t, newMemBackend(), DefaultConfig().NoCache()))
	})
}
