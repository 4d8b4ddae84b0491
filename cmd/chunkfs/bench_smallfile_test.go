package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestBenchSmallFlags(t *testing.T) {
	cfg, _, err := benchSmallFlags([]string{"--files", "500", "--procs", "1,2", "--mount-args", "--no-cache  --close-sync=false"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Files != 500 || !reflect.DeepEqual(cfg.Procs, []int{1, 2}) || !reflect.DeepEqual(cfg.MountArgs, []string{"--no-cache", "--close-sync=false"}) {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range [][]string{{"--procs", "1,x"}, {"--procs", "0"}, {"extra"}, {"--files", "many"}} {
		if _, _, err := benchSmallFlags(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want a one-line error", bad, err)
		}
	}
}

func TestMountCloseSyncFlag(t *testing.T) {
	o, err := mountFlags([]string{"--insecure", "/mnt"})
	if err != nil {
		t.Fatal(err)
	}
	if o.noCloseSync {
		t.Error("close-sync is off by default")
	}
	if o, err = mountFlags([]string{"--insecure", "--close-sync=false", "/mnt"}); err != nil || !o.noCloseSync {
		t.Errorf("--close-sync=false: %v, %v", o.noCloseSync, err)
	}
}

// TestMountAsyncFlags: --async-close and --async-create are off by
// default, take a count, and refuse one out of range in one line.
func TestMountAsyncFlags(t *testing.T) {
	for flag, get := range map[string]func(o mountOptions) int{
		"--async-close":  func(o mountOptions) int { return o.fuse.AsyncClose },
		"--async-create": func(o mountOptions) int { return o.fuse.AsyncCreate },
	} {
		o, err := mountFlags([]string{"--insecure", "/mnt"})
		if err != nil || get(o) != 0 {
			t.Fatalf("%s default: %d, %v; want 0 (off)", flag, get(o), err)
		}
		if o, err = mountFlags([]string{"--insecure", flag, "16", "/mnt"}); err != nil || get(o) != 16 {
			t.Errorf("%s 16: %d, %v", flag, get(o), err)
		}
		for _, bad := range []string{"-1", "5000", "x"} {
			if _, err := mountFlags([]string{"--insecure", flag, bad, "/mnt"}); err == nil || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s %s: %v, want a one-line error", flag, bad, err)
			}
		}
	}
}
