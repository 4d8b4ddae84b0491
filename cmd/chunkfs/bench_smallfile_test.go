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
