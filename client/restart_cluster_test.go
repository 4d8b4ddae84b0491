package client_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
)

// TestMetadataCallsWaitForARestartingMaster: a lone master that was down
// (the client's connection to it failing, reconnecting with back-off) and
// is up again answers every metadata call made at once, within the call's
// deadline: the call is tried again while no master received it, as a
// group's calls are. Without that, the create failed "connection refused"
// while its connection was between reconnects (EIO on a mount).
func TestMetadataCallsWaitForARestartingMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the master")
	}
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	c := tc.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tc.StopMaster(); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Stat(short, "/d")
	stop()
	if err == nil {
		t.Fatal("stat with the master down succeeded")
	}
	if err := tc.StartMaster(); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile(ctx, "/d/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatalf("create right after the master came back: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of the empty file: %v", err)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"mkdir", func() error { return c.Mkdir(ctx, "/d/sub", 0o755) }},
		{"rename", func() error { return c.Rename(ctx, "/d/new", "/d/sub/moved") }},
		{"chmod", func() error { return c.Chmod(ctx, "/d/sub/moved", 0o600) }},
		{"readdir", func() error { _, err := c.ReadDir(ctx, "/d/sub"); return err }},
		{"remove", func() error { return c.Remove(ctx, "/d/sub/moved") }},
		{"stat", func() error {
			if _, err := c.Stat(ctx, "/d/sub/moved"); !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Errorf("%s after the restart: %v", s.name, err)
		}
	}
}
