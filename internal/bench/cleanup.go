package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CheckPrivileges returns a one-line error when the testbed cannot be built
// here: it needs root (network namespaces, tc) and iproute2's ip and tc.
func CheckPrivileges() error {
	if os.Geteuid() != 0 {
		return errors.New("the benchmark testbed needs root (network namespaces and tc shaping); run it with sudo")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the benchmark testbed needs %q from iproute2; install iproute2", tool)
		}
	}
	return nil
}

// LockPath is the lock file that keeps two testbeds with the same prefix on
// one machine from removing each other's namespaces as leftovers.
func LockPath(prefix string) string {
	return filepath.Join(os.TempDir(), "chunkfs-testbed-"+strings.TrimSuffix(prefix, "-")+".lock")
}

// Lock takes the machine-wide testbed lock, waiting for another run to end
// or for ctx. The returned function releases it.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testbed lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("testbed lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another benchmark testbed to finish (lock %s): %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Cleanup removes every namespace whose name starts with prefix, killing the
// processes left inside it first: the remains of a run that was killed before
// it could tear its testbed down. Call it only while holding the lock.
func Cleanup(ctx context.Context, prefix string, log *slog.Logger) error {
	return cleanup(ctx, execCommander{log: log}, prefix)
}

func cleanup(ctx context.Context, cmd commander, prefix string) error {
	out, err := cmd.run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range leftoverNamespaces(out, prefix) {
		if err := killAllIn(ctx, cmd, ns); err != nil {
			errs = append(errs, err)
		}
		if _, err := cmd.run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftoverNamespaces picks from `ip netns list` output (one namespace a line,
// its name first, maybe followed by "(id: N)") the names starting with prefix.
func leftoverNamespaces(list, prefix string) []string {
	var out []string
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			out = append(out, f[0])
		}
	}
	return out
}

// killAllIn kills, by process ID, every process in namespace ns (all of them
// started by an earlier run of the benchmark) and waits for them to go.
func killAllIn(ctx context.Context, cmd commander, ns string) error {
	for range 50 {
		out, err := cmd.run(ctx, "ip", "netns", "pids", ns)
		if err != nil {
			return err
		}
		pids := parsePIDs(out)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("processes in namespace %s did not exit", ns)
}

func parsePIDs(s string) []int {
	var pids []int
	for _, f := range strings.Fields(s) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}
