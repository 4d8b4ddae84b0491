package main

import (
	"flag"
	"log/slog"
)

// logLevel is the --log-level flag of the server and mount commands: the
// least level logged, overriding -v when given. At debug, masters,
// chunkservers and mounts log each call and data-stream request that
// carries a request ID, with it (req=…), so one operation can be followed
// across processes.
type logLevel struct {
	set   bool
	level slog.Level
}

func (l *logLevel) String() string {
	if l == nil || !l.set {
		return ""
	}
	return l.level.String()
}

func (l *logLevel) Set(s string) error {
	l.set = true
	return l.level.UnmarshalText([]byte(s))
}

// or is the level given, or def when none was.
func (l *logLevel) or(def slog.Level) slog.Level {
	if l.set {
		return l.level
	}
	return def
}

// addLogLevel defines --log-level on fs.
func addLogLevel(fs *flag.FlagSet, l *logLevel, def string) {
	fs.Var(l, "log-level", "least `LEVEL` logged: debug (each call with its request ID, req=…), info, warn or error (default "+def+")")
}
