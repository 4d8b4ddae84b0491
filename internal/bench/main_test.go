package bench

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// workerEnv makes the test binary act as a worker process: the tests run
// their workers as "this binary with workerEnv=1", the way the chunkfs
// binary runs them as "chunkfs bench-worker".
const workerEnv = "CHUNKFS_BENCH_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := WorkerMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// needTestbed skips the test unless it can build a testbed here.
func needTestbed(t *testing.T) {
	t.Helper()
	if err := CheckPrivileges(); err != nil {
		t.Skip(err)
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
}

// testWorkerArgv runs WorkerMain in a child of the test binary.
func testWorkerArgv(t *testing.T) []string {
	t.Helper()
	t.Setenv(workerEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}
