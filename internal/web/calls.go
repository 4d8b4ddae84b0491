package web

import (
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Calls counts the calls a master answers, for its metrics and for Table
// 3's master operations. Its ObserveCall is the master's
// rpc.CallObserver (master.Config.OnCall), so it exists before the master
// and its page do. A nil *Calls counts nothing.
type Calls struct {
	reg *metrics.Registry
	ops atomic.Int64 // client operations answered
}

// NewCalls returns a counter that also records each call in reg (nil:
// none).
func NewCalls(reg *metrics.Registry) *Calls { return &Calls{reg: reg} }

// ObserveCall counts one answered call.
func (c *Calls) ObserveCall(fullMethod, code string, elapsed time.Duration) {
	c.reg.ObserveCall(fullMethod, code, elapsed)
	if !serverCall[rpc.MethodName(fullMethod)] {
		c.ops.Add(1)
	}
}

// Ops returns the client operations answered so far.
func (c *Calls) Ops() int64 {
	if c == nil {
		return 0
	}
	return c.ops.Load()
}

// serverCall names the calls chunkservers make: not master operations in
// Table 3's sense.
var serverCall = map[string]bool{"Register": true, "Heartbeat": true, "ReportCorrupt": true}
