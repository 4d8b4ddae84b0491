package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// Task is what a worker process is told to do, as one JSON line on its
// standard input. The coordinator then waits for every worker's ready
// message and sends each the line "go", so that all start together.
type Task struct {
	Op     Op     `json:"op"`
	Master string `json:"master,omitempty"` // host:port of the master
	// TLSDir is the directory of the client certificate the worker
	// connects with (a cluster run with Config.TLS); "": plain TCP.
	TLSDir string `json:"tls_dir,omitempty"`
	// Path is the file written (writes), appended to (appends) or the
	// directory of the read set (reads).
	Path   string   `json:"path,omitempty"`
	Files  []string `json:"files,omitempty"`   // read set (reads, prepare)
	Bytes  int64    `json:"bytes,omitempty"`   // bytes to move, in IOSize operations
	IOSize int64    `json:"io_size,omitempty"` // one write, read region or record
	Seed   int64    `json:"seed,omitempty"`    // random choices of reads
	// Servers is the number of live chunkservers to wait for (OpWait).
	Servers int `json:"servers,omitempty"`
	// PerChunk makes OpLocate list each chunk's replicas (Placement.ByChunk).
	PerChunk bool `json:"per_chunk,omitempty"`
	// Addr is the address a sink listens on or a source sends to.
	Addr    string        `json:"addr,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"` // for the whole task; 0: none
	Meta    *MetaLoad     `json:"meta,omitempty"`    // OpMeta (observers_load.go)
	Watch   *WatchSpec    `json:"watch,omitempty"`   // OpWatch
	Small   *SmallTask    `json:"small,omitempty"`   // OpSmallfile (smallfile_worker.go)
}

// security is what the worker connects with: the certificate in TLSDir,
// or plain TCP.
func (t *Task) security() (*client.Security, error) {
	if t.TLSDir == "" {
		return client.Insecure(), nil
	}
	return client.LoadSecurity(t.TLSDir)
}

// Op names a worker task.
type Op string

// The worker tasks.
const (
	OpWait    Op = "wait"      // wait until the master sees Servers live chunkservers
	OpPrepare Op = "prepare"   // write Files, each Bytes long, as the read set
	OpRead    Op = "read"      // read random IOSize regions of Files, Bytes in all
	OpWrite   Op = "write"     // write Path anew in IOSize writes, Bytes in all
	OpAppend  Op = "append"    // append IOSize records to Path, Bytes in all
	OpSink    Op = "sink"      // accept TCP connections on Addr and discard their data
	OpSource  Op = "source"    // send Bytes over TCP to Addr (network calibration)
	OpProbe   Op = "probe"     // time each step of writes and appends to Path, Bytes/IOSize rounds
	OpLocate  Op = "locate"    // report where the replicas of Files are
	OpMeta    Op = "meta"      // the observer-reads metadata workload, Meta, against the masters Master
	OpSmall   Op = "smallfile" // one phase of bench smallfile, Small, through syscalls on a directory
)

// maxTaskLine bounds the task line a worker accepts.
const maxTaskLine = 1 << 20

// Validate checks a task decoded from the wire.
func (t *Task) Validate() error {
	switch t.Op {
	case OpWait, OpPrepare, OpRead, OpWrite, OpAppend, OpSink, OpSource, OpProbe, OpLocate, OpWatch, OpReadLoad, OpWriteLoad:
	case OpMeta:
		return t.Meta.validate()
	case OpSmall:
		return t.Small.validate()
	default:
		return fmt.Errorf("unknown task op %q", t.Op)
	}
	switch {
	case t.Bytes < 0 || t.IOSize < 0 || t.Servers < 0 || t.Timeout < 0:
		return errors.New("task has a negative size, count or timeout")
	case t.Bytes > 1<<40 || t.IOSize > 256<<20 || len(t.Files) > 1<<16:
		return errors.New("task sizes out of range")
	case (t.Op == OpRead || t.Op == OpWrite || t.Op == OpAppend || t.Op == OpPrepare || t.Op == OpProbe) && t.IOSize == 0:
		return fmt.Errorf("task %s needs an I/O size", t.Op)
	case t.Op == OpRead && len(t.Files) == 0:
		return errors.New("read task has no files")
	}
	return nil
}

// Result is what a worker reports when its task is done.
type Result struct {
	Bytes   int64 `json:"bytes"`    // payload bytes moved
	Ops     int64 `json:"ops"`      // operations (writes, region reads, records)
	StartNS int64 `json:"start_ns"` // wall clock, Unix nanoseconds, when it began moving data
	EndNS   int64 `json:"end_ns"`   // and when the last byte was acknowledged
	// PhasesMS is the probe's median time of each step, in milliseconds.
	PhasesMS map[string]float64 `json:"phases_ms,omitempty"`
	// Placement is what a locate task found.
	Placement *Placement `json:"placement,omitempty"`
	// ChunkBytes is, of an append task, the bytes of the records that
	// landed in each chunk of the file, by the chunk's index: the
	// servers that received them are those chunks' replicas.
	ChunkBytes map[int64]int64 `json:"chunk_bytes,omitempty"`
	// OpsMS is how long each operation took, in milliseconds, in order
	// (at most maxOpTimes; a write task's last entry is its Close), to
	// show where a client waited.
	OpsMS []float64 `json:"ops_ms,omitempty"`
	// Events are the steps inside the operations that the client library
	// logs (reads: every piece of a region; writes and appends: every
	// attempt, with its steps), start times in Unix ms.
	Events []Event `json:"events,omitempty"`
	// Meta is what an observer-reads load generator measured.
	Meta *MetaResult `json:"meta,omitempty"`
	// Recovery is what the tasks of bench recovery report.
	Recovery *RecoveryResult `json:"recovery,omitempty"`
}

// maxOpTimes bounds Result.OpsMS.
const maxOpTimes = 4096

// opTimer collects Result.OpsMS.
type opTimer struct{ ms []float64 }

// since records an operation that began at t.
func (o *opTimer) since(t time.Time) {
	if len(o.ms) < maxOpTimes {
		o.ms = append(o.ms, float64(time.Since(t).Microseconds())/1000)
	}
}

// Seconds is the worker's own elapsed time.
func (r Result) Seconds() float64 { return float64(r.EndNS-r.StartNS) / 1e9 }

// workerMsg is one line a worker writes on its standard output.
type workerMsg struct {
	Ready  bool    `json:"ready,omitempty"`
	Result *Result `json:"result,omitempty"`
	Err    string  `json:"error,omitempty"`
}

// runner is a task split in two: setup (connect, open files), then the
// measured run.
type runner interface {
	run(ctx context.Context) (Result, error)
	close() error
}

// WorkerMain is the body of the hidden `chunkfs bench-worker` subcommand:
// it reads a Task from in, sets it up, says it is ready, waits for "go",
// runs it and writes the Result (or the error) to out as JSON lines.
func WorkerMain(ctx context.Context, in io.Reader, out io.Writer) error {
	br := bufio.NewReaderSize(in, 64<<10)
	enc := json.NewEncoder(out)
	task, err := decodeTaskLine(br)
	if err != nil {
		enc.Encode(workerMsg{Err: err.Error()})
		return err
	}
	if task.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, task.Timeout)
		defer cancel()
	}
	res, err := workerRun(ctx, task, br, enc)
	if err != nil {
		enc.Encode(workerMsg{Err: err.Error()})
		return err
	}
	return enc.Encode(workerMsg{Result: &res})
}

func workerRun(ctx context.Context, task Task, br *bufio.Reader, enc *json.Encoder) (Result, error) {
	r, err := setupTask(ctx, task)
	if err != nil {
		return Result{}, err
	}
	res, err := readyAndRun(ctx, r, br, enc)
	if cerr := r.close(); err == nil {
		err = cerr
	}
	return res, err
}

func readyAndRun(ctx context.Context, r runner, br *bufio.Reader, enc *json.Encoder) (Result, error) {
	if err := enc.Encode(workerMsg{Ready: true}); err != nil {
		return Result{}, err
	}
	if err := awaitGo(br); err != nil {
		return Result{}, err
	}
	// Closing our input after "go" aborts the task (and ends a sink).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, br)
		cancel()
	}()
	return r.run(ctx)
}

// decodeTaskLine decodes the first line of in.
func decodeTaskLine(br *bufio.Reader) (Task, error) {
	line, err := readLine(br)
	if err != nil {
		return Task{}, fmt.Errorf("read task: %w", err)
	}
	return decodeTask(line)
}

func decodeTask(line []byte) (Task, error) {
	var t Task
	if err := json.Unmarshal(line, &t); err != nil {
		return Task{}, fmt.Errorf("decode task: %w", err)
	}
	return t, t.Validate()
}

// readLine reads one line of at most maxTaskLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, frag...)
		if len(line) > maxTaskLine {
			return nil, errors.New("line too long")
		}
		if !isPrefix {
			return line, nil
		}
	}
}

func awaitGo(br *bufio.Reader) error {
	line, err := readLine(br)
	if err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	if string(line) != "go" {
		return fmt.Errorf("waiting for go: got %q", line)
	}
	return nil
}

// timed runs body between two wall-clock readings.
func timed(body func() (bytes, ops int64, err error)) (Result, error) {
	start := time.Now()
	b, n, err := body()
	return Result{Bytes: b, Ops: n, StartNS: start.UnixNano(), EndNS: time.Now().UnixNano()}, err
}
