package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is a process running in a testbed namespace, started through
// `nsenter --net`, which execs the command in place so the process ID is the
// command's own. Unlike `ip netns exec` it enters only the network
// namespace and makes no mount namespace: a private copy of the mount table
// would hold on to FUSE mounts made meanwhile by anyone on the machine (a
// mount test running beside the benchmark), and their unmount would then
// wait for the benchmark to end.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status; read after done is closed
}

// startIn starts argv in namespace ns ("": this machine's own, as bench
// smallfile runs everything). Its standard error (and standard
// output, when stdout is nil) go to logFile; stdin may be nil. The files are
// handed to the child as they are (no copying goroutines), so that waiting
// for it never depends on someone reading its output.
func startIn(name, ns string, argv []string, logFile, stdin, stdout *os.File) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if ns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=" + filepath.Join("/run/netns", ns), "--"}, argv...)...)
	}
	cmd.Stdout = logFile
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.Stderr = logFile
	// Die with the benchmark even if it is killed before it can stop us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, ns, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM), then kills it after grace.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	p.cmd.Process.Kill()
	<-p.done
	return nil
}

// wait waits for the process to end or ctx to be done.
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		var exit *exec.ExitError
		if errors.As(p.err, &exit) {
			return fmt.Errorf("%s exited: %s", p.name, exit.ProcessState)
		}
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
