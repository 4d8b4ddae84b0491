package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// workerProc is the coordinator's end of a worker process.
type workerProc struct {
	p       *proc
	in      *os.File // its standard input
	outFile *os.File // its standard output
	out     *bufio.Scanner
	log     *os.File
	label   string
}

// startWorker starts a worker in host's namespace and sends it its task.
func startWorker(cfg Config, h Host, task Task, logDir, label string) (*workerProc, error) {
	log, err := os.Create(filepath.Join(logDir, label+".log"))
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		log.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	p, err := startIn(label, h.NS, cfg.WorkerArgv, log, inR, outW)
	inR.Close() // the child has its own copies now
	outW.Close()
	if err != nil {
		log.Close()
		inW.Close()
		outR.Close()
		return nil, err
	}
	w := &workerProc{p: p, in: inW, outFile: outR, out: bufio.NewScanner(outR), log: log, label: label}
	w.out.Buffer(make([]byte, 64<<10), maxReportLine)
	line, err := json.Marshal(task)
	if err == nil {
		_, err = fmt.Fprintf(inW, "%s\n", line)
	}
	if err != nil {
		w.kill()
		return nil, fmt.Errorf("%s: send task: %w", label, err)
	}
	return w, nil
}

// next reads the worker's next message, or fails with its error and the
// tail of its log.
func (w *workerProc) next() (workerMsg, error) {
	if !w.out.Scan() {
		return workerMsg{}, fmt.Errorf("%s ended without a report: %s", w.label, w.logTail())
	}
	var m workerMsg
	if err := json.Unmarshal(w.out.Bytes(), &m); err != nil {
		return workerMsg{}, fmt.Errorf("%s: bad report %q", w.label, w.out.Bytes())
	}
	if m.Err != "" {
		return m, fmt.Errorf("%s: %s", w.label, m.Err)
	}
	return m, nil
}

// logTail returns the last line of the worker's log.
func (w *workerProc) logTail() string {
	b, _ := os.ReadFile(w.log.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last
	}
	return fmt.Sprintf("no output (log %s)", w.log.Name())
}

// kill ends the worker, waits for it and closes its pipes.
func (w *workerProc) kill() {
	w.in.Close()
	w.p.stop(2 * time.Second)
	w.outFile.Close()
	w.log.Close()
}

// runWorkers runs one task per host at once: starts them all, waits until
// all are ready, tells them all to go, and collects their results.
func runWorkers(ctx context.Context, cfg Config, hosts []Host, tasks []Task, logDir, label string) ([]Result, error) {
	ws := make([]*workerProc, 0, len(hosts))
	defer func() {
		for _, w := range ws {
			w.kill()
		}
	}()
	for i, h := range hosts {
		w, err := startWorker(cfg, h, tasks[i], logDir, fmt.Sprintf("%s-%02d", label, i+1))
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	stop := context.AfterFunc(ctx, func() {
		for _, w := range ws {
			w.in.Close()
			w.p.cmd.Process.Kill()
		}
	})
	defer stop()
	res, err := driveWorkers(ws)
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return res, err
}

func driveWorkers(ws []*workerProc) ([]Result, error) {
	for _, w := range ws {
		m, err := w.next()
		if err != nil {
			return nil, err
		}
		if !m.Ready {
			return nil, fmt.Errorf("%s: expected ready", w.label)
		}
	}
	for _, w := range ws {
		if _, err := io.WriteString(w.in, "go\n"); err != nil {
			return nil, fmt.Errorf("%s: %w", w.label, err)
		}
	}
	return collectResults(ws)
}

// collectResults reads every worker's result, in order.
func collectResults(ws []*workerProc) ([]Result, error) {
	res := make([]Result, len(ws))
	var errs []error
	for i, w := range ws {
		m, err := w.next()
		switch {
		case err != nil:
			errs = append(errs, err)
		case m.Result == nil:
			errs = append(errs, fmt.Errorf("%s: expected a result", w.label))
		default:
			res[i] = *m.Result
		}
	}
	return res, errors.Join(errs...)
}

// maxReportLine bounds a line a worker reports: a result with its
// operation times (maxOpTimes) and events (maxEvents, ~160 bytes each in
// JSON) fits with room to spare.
const maxReportLine = 4 << 20
