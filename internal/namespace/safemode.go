package namespace

// safeHold is what operators decided about the master's safe mode, kept in
// the log so that every master of a group, and every restart, agrees:
// whether one holds the cluster in safe mode (admin safemode enter), and
// when one last made the masters leave it (admin safemode leave).
type safeHold struct {
	held bool  // in safe mode until an operator leaves it, whatever the count of located chunks
	left int64 // Unix ns, the leader's clock: the last forced leave; 0 if none
}

// safeMode applies OpSafeMode: with FlagSafeModeEnter it holds the master
// in safe mode; without, it releases the hold and records the forced
// leave's time, which ends the start-up safe mode of every master that
// started before it (master/safemode.go), not of one that starts later.
// Either is idempotent.
func (ns *Namespace) safeMode(c *Command) {
	if c.Flags&FlagSafeModeEnter != 0 {
		ns.safe.held = true
		return
	}
	ns.safe.held = false
	ns.safe.left = max(ns.safe.left, c.Time)
}

// SafeModeHeld reports whether an operator holds the master in safe mode,
// and when one last forced it out (Unix ns, 0 if never).
func (ns *Namespace) SafeModeHeld() (held bool, leftAt int64) {
	return ns.safe.held, ns.safe.left
}
