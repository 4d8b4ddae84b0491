package fusefs

import "testing"

// TestPOSIXMemory runs the POSIX suites on the FUSE layer over the
// in-memory backend, with every cache on, with --async-close too and with
// --no-cache.
func TestPOSIXMemory(t *testing.T) {
	t.Run("cached", func(t *testing.T) {
		runPOSIX(t, mountT(t, newMemBackend(), DefaultConfig()))
	})
	t.Run("async-close", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AsyncClose = 16
		runPOSIX(t, mountT(t, newMemBackend(), cfg))
	})
	t.Run("nocache", func(t *testing.T) {
		runPOSIX(t, mountT(t, newMemBackend(), DefaultConfig().NoCache()))
	})
}
