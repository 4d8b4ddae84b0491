package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
)

// TestWorkerProtocol drives WorkerMain as the coordinator does: a task line,
// a ready message, "go", a result.
func TestWorkerProtocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		received <- n
	}()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- WorkerMain(context.Background(), inR, outW)
		outW.Close()
	}()
	task, _ := json.Marshal(Task{Op: OpSource, Addr: ln.Addr().String(), Bytes: 3 << 20})
	go io.WriteString(inW, string(task)+"\n")
	out := bufio.NewScanner(outR)
	if m := nextMsg(t, out); !m.Ready {
		t.Fatalf("first message %+v, want ready", m)
	}
	go io.WriteString(inW, "go\n")
	m := nextMsg(t, out)
	if m.Result == nil || m.Result.Bytes != 3<<20 || m.Result.EndNS < m.Result.StartNS {
		t.Fatalf("result %+v", m)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := <-received; n != 3<<20 {
		t.Fatalf("listener received %d bytes", n)
	}
}

func TestWorkerRejectsBadTask(t *testing.T) {
	for _, in := range []string{
		"not json\n",
		`{"op":"format-disk"}` + "\n",
		`{"op":"read","io_size":4194304}` + "\n",
		`{"op":"write","bytes":-1,"io_size":1}` + "\n",
		"",
	} {
		var out strings.Builder
		if err := WorkerMain(context.Background(), strings.NewReader(in), &out); err == nil {
			t.Errorf("task %q accepted", in)
		}
		var m workerMsg
		if err := json.Unmarshal([]byte(out.String()), &m); err != nil || m.Err == "" {
			t.Errorf("task %q: output %q is not an error message", in, out.String())
		}
	}
}

func nextMsg(t *testing.T, s *bufio.Scanner) workerMsg {
	t.Helper()
	if !s.Scan() {
		t.Fatal("worker output ended")
	}
	var m workerMsg
	if err := json.Unmarshal(s.Bytes(), &m); err != nil {
		t.Fatalf("bad message %q", s.Bytes())
	}
	if m.Err != "" {
		t.Fatalf("worker error: %s", m.Err)
	}
	return m
}

func FuzzDecodeTask(f *testing.F) {
	f.Add([]byte(`{"op":"read","files":["/a"],"bytes":100,"io_size":4194304,"seed":3}`))
	f.Add([]byte(`{"op":"sink","addr":"198.18.1.1:7100"}`))
	f.Add([]byte(`{"op":"write","path":"/x","bytes":1,"io_size":1,"timeout":-5}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		task, err := decodeTask(line)
		if err != nil {
			return
		}
		if task.Validate() != nil {
			t.Fatalf("decodeTask returned an invalid task %+v", task)
		}
		if task.Bytes < 0 || task.IOSize < 0 || task.IOSize > 256<<20 {
			t.Fatalf("out-of-range sizes passed: %+v", task)
		}
	})
}
