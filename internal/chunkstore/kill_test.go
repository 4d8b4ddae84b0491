package chunkstore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// killChildEnv names the data directory of the child process of
// TestSIGKILLMidWrite.
const killChildEnv = "CHUNKSTORE_KILL_CHILD_DIR"

// TestMain lets the test binary double as the child that
// TestSIGKILLMidWrite kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	os.Exit(m.Run())
}

// killChild writes overlapping, block-straddling regions of chunk 1 for
// ever, saying "ready" on stdout after the first hundred writes.
func killChild(dir string) {
	cfg := DefaultConfig()
	cfg.Dirs = []string{dir}
	s, err := Open(cfg)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	s.Create(1, 1)
	p := make([]byte, 3*BlockSize/2)
	for gen := 1; ; gen++ {
		for i := range p {
			p[i] = byte(gen)
		}
		off := int64(gen*7919%64) * 10007
		if err := s.Write(1, off, p); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		if gen == 100 {
			fmt.Println("ready")
		}
	}
}

// TestSIGKILLMidWrite kills a process in the middle of a stream of writes,
// several times, then checks that the chunk either passes its checksums or
// is reported corrupt: a read never returns unchecked bytes.
func TestSIGKILLMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	outcomes := map[string]int{}
	for range 5 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			cmd.Process.Kill()
			t.Fatalf("child: %q", line)
		}
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		s := openStore(t, nil, dir)
		err = s.Verify(1)
		switch {
		case err == nil:
			outcomes["clean"]++
			in, _ := s.Info(1)
			p := make([]byte, in.Length)
			if _, err := s.Read(1, 0, p); err != nil && err != io.EOF {
				t.Fatalf("verified chunk unreadable: %v", err)
			}
		case chunkfs.KindOf(err) == chunkfs.KindChecksum:
			outcomes["corrupt"]++
			if c := s.Corrupt(); len(c) != 1 || c[0] != 1 {
				t.Fatalf("failing chunk not listed corrupt: %v", c)
			}
		default:
			t.Fatalf("after SIGKILL: %v", err)
		}
	}
	t.Logf("outcomes after SIGKILL: %v", outcomes)
}
