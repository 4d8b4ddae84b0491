package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// TestXattrsThroughCluster sets, reads, lists and removes extended
// attributes through the library, checks another user is refused, and
// that they survive a master restart (the log) and are removed with
// the file.
func TestXattrsThroughCluster(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice, err := tc.NewClientAs(chunkfs.Caller{UID: 1000, GIDs: []uint32{100}})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := tc.NewClientAs(chunkfs.Caller{UID: 1001, GIDs: []uint32{101}})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	root := tc.Client()
	if err := root.Mkdir(ctx, "/home", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := root.Chmod(ctx, "/home", 0o777); err != nil {
		t.Fatal(err)
	}
	f, err := alice.Create(ctx, "/home/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := alice.Chmod(ctx, "/home/f", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := alice.SetXattr(ctx, "/home/f", "user.mime", []byte("text/plain"), 0); err != nil {
		t.Fatal(err)
	}
	if err := alice.SetXattr(ctx, "/home/f", "user.mime", []byte("x"), client.XattrCreate); chunkfs.KindOf(err) != chunkfs.KindExist {
		t.Errorf("create over an existing attribute: %v", err)
	}
	if _, err := bob.GetXattr(ctx, "/home/f", "user.mime"); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("bob reads alice's 0600 file's attribute: %v", err)
	}
	if err := bob.SetXattr(ctx, "/home/f", "user.x", nil, 0); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("bob sets an attribute on alice's 0600 file: %v", err)
	}
	if err := root.SetXattr(ctx, "/home/f", "trusted.tier", []byte("ssd"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tc.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	v, err := alice.GetXattr(ctx, "/home/f", "user.mime")
	if err != nil || string(v) != "text/plain" {
		t.Fatalf("after a master restart: %q, %v", v, err)
	}
	names, err := alice.ListXattr(ctx, "/home/f")
	if err != nil || !slices.Equal(names, []string{"user.mime"}) {
		t.Errorf("alice lists %q, %v", names, err)
	}
	if names, _ := root.ListXattr(ctx, "/home/f"); !slices.Equal(names, []string{"trusted.tier", "user.mime"}) {
		t.Errorf("root lists %q", names)
	}
	if err := alice.RemoveXattr(ctx, "/home/f", "user.mime"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.GetXattr(ctx, "/home/f", "user.mime"); chunkfs.KindOf(err) != chunkfs.KindNoAttr {
		t.Errorf("removed attribute: %v", err)
	}
	if err := alice.Remove(ctx, "/home/f"); err != nil {
		t.Fatal(err)
	}
	g, err := alice.Create(ctx, "/home/f")
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if names, _ := root.ListXattr(ctx, "/home/f"); len(names) != 0 {
		t.Errorf("a new file under the old name has attributes %q", names)
	}
}
