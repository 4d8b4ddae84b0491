package bench

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Ports the servers listen on, each in its own namespace.
const (
	masterPort      = "7000"
	chunkserverPort = "7001"
)

// cluster is the chunkfs master and chunkservers running in the testbed.
type cluster struct {
	master    string // host:port
	chunkSize int64
	procs     []*proc
	logs      []*os.File
	tlsDir    string // the workers' client certificate; "": plain TCP
}

// startCluster starts the master of a new file system with chunks of
// chunkSize bytes and one chunkserver per
// chunkserver host, each writing its data under dir and its log beside it.
func startCluster(tb *Testbed, cfg Config, dir string, chunkSize int64) (*cluster, error) {
	c := &cluster{master: net.JoinHostPort(tb.Master.Addr.String(), masterPort), chunkSize: chunkSize}
	tlsArgs, err := clusterPKI(tb, cfg.Binary, cfg.TLS, filepath.Join(dir, "tls"))
	if err != nil {
		return nil, err
	}
	if cfg.TLS {
		c.tlsDir = filepath.Join(dir, "tls", "bench")
	}
	argv := append([]string{cfg.Binary, "master", "--dir", filepath.Join(dir, "master"), "--listen", c.master,
		"--chunk-size", strconv.FormatInt(chunkSize, 10)}, tlsArgs("master")...)
	argv = append(argv, cfg.MasterArgs...)
	if err := c.start("master", tb.Master.NS, argv, dir); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	for i, h := range tb.Chunkservers {
		name := fmt.Sprintf("chunkserver%02d", i+1)
		argv := append([]string{cfg.Binary, "chunkserver",
			"--dir", filepath.Join(dir, name),
			"--listen", net.JoinHostPort(h.Addr.String(), chunkserverPort),
			"--master", c.master,
			"--rack", "chunkserver-switch"}, tlsArgs(name)...)
		argv = append(argv, cfg.ChunkserverArgs...)
		if err := c.start(name, h.NS, argv, dir); err != nil {
			return nil, errors.Join(err, c.stop())
		}
	}
	return c, nil
}

func (c *cluster) start(name, ns string, argv []string, dir string) error {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return err
	}
	c.logs = append(c.logs, log)
	p, err := startIn(name, ns, argv, log, nil, nil)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// failed returns an error naming the first server that has exited, with
// the end of its log.
func (c *cluster) failed() error {
	for i, p := range c.procs {
		if p.exited() {
			return fmt.Errorf("%s exited early (%v); its log ends: %s", p.name, p.err, logTail(c.logs[i].Name(), 600))
		}
	}
	return nil
}

// logTail returns the last n bytes of the file at path, on one line.
func logTail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")
}

// stop stops every server and closes their logs.
func (c *cluster) stop() error {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(5 * time.Second)
	}
	var errs []error
	for _, f := range c.logs {
		errs = append(errs, f.Close())
	}
	c.procs, c.logs = nil, nil
	return errors.Join(errs...)
}

// clusterPKI makes, when on, a CA under dir and a certificate for the
// master, each chunkserver (named chunkserverNN, for their testbed
// addresses) and the workers (bench, acting as root), with the chunkfs
// binary's cert command as an operator would, and returns the TLS flags of
// each server's command line: --tls-dir of its certificate, or --insecure.
func clusterPKI(tb *Testbed, binary string, on bool, dir string) (func(name string) []string, error) {
	if !on {
		return func(string) []string { return []string{"--insecure"} }, nil
	}
	ca := filepath.Join(dir, "ca")
	if err := runCert(binary, "init", "--dir", ca, "--name", "chunkfs bench CA", "--days", "7"); err != nil {
		return nil, err
	}
	issue := func(role, name string, more ...string) error {
		args := append([]string{"issue", "--dir", ca, "--role", role, "--name", name, "--days", "7", "--out", filepath.Join(dir, name)}, more...)
		return runCert(binary, args...)
	}
	if err := issue("master", "master", "--host", tb.Master.Addr.String()); err != nil {
		return nil, err
	}
	for i, h := range tb.Chunkservers {
		if err := issue("chunkserver", fmt.Sprintf("chunkserver%02d", i+1), "--host", h.Addr.String()); err != nil {
			return nil, err
		}
	}
	if err := issue("client", "bench", "--uid", "0", "--gids", "0"); err != nil {
		return nil, err
	}
	return func(name string) []string { return []string{"--tls-dir", filepath.Join(dir, name)} }, nil
}

// runCert runs `chunkfs cert` with args; a failure quotes its first line of
// output.
func runCert(binary string, args ...string) error {
	out, err := exec.Command(binary, append([]string{"cert"}, args...)...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("chunkfs cert %s: %s", args[0], firstLine(msg))
	}
	return nil
}
