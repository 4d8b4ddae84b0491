package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
)

// commander runs the ip and tc commands that build and remove a testbed. The
// real one execs them; tests record them.
type commander interface {
	// run runs a command and returns its standard output; a failure is an
	// error naming the command and quoting its standard error.
	run(ctx context.Context, name string, args ...string) (string, error)
	// runInput is run with input as the command's standard input.
	runInput(ctx context.Context, input, name string, args ...string) (string, error)
}

// execCommander runs commands with os/exec.
type execCommander struct{ log *slog.Logger }

func (c execCommander) run(ctx context.Context, name string, args ...string) (string, error) {
	return c.runInput(ctx, "", name, args...)
}

func (c execCommander) runInput(ctx context.Context, input, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	c.log.Debug("exec", "cmd", name+" "+strings.Join(args, " "), "input", input)
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), firstLine(msg))
	}
	return stdout.String(), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
