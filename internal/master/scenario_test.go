package master

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestScenarios runs the lease and registry transcripts in testdata: each
// command line is followed by "> " lines with what it must print.
//
//	servers a b c         start fake chunkservers and register them
//	create /f             create a file as alice
//	prepare /f 0 [append] PrepareWrite: "v=N replicas=K primary=NAME" or "error KIND"
//	advance 10s           move the fake clock
//	beat a b [extend]     heartbeats (extend: every lease the server holds)
//	fail a / heal a       make a server's Lease calls fail or work
//	liveness              run the dead-server check
//	restart               close the master and open it again on its directory
//	snapshot /f /g        MakeSnapshot: "revoked=N" or "error KIND"
//	chunk /f 0            the file's chunk: "handle=H v=N shared=BOOL"
//	delete /f             Delete (prints only an error)
//	collect a b           heartbeats; each server deletes the garbage it is
//	                      handed: "a: deleted=[HANDLES]" when there is some
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenarios")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

type scenario struct {
	t       *testing.T
	tm      *testMaster
	servers map[string]*fakeCS
	names   map[string]string // address → name
	out     []string
}

func runScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &scenario{t: t, tm: startMaster(t, "", nil), servers: map[string]*fakeCS{}, names: map[string]string{}}
	var want []string
	cmd, line := "", 0
	check := func() {
		if cmd != "" && !slices.Equal(s.out, want) {
			t.Errorf("%s:%d: %s\n got: %q\nwant: %q", file, line, cmd, s.out, want)
		}
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#"):
		case strings.HasPrefix(text, ">"):
			want = append(want, strings.TrimSpace(text[1:]))
		default:
			check()
			cmd, line, want, s.out = text, n, nil, nil
			s.run(strings.Fields(text))
		}
	}
	check()
}

func (s *scenario) printf(format string, args ...any) {
	s.out = append(s.out, fmt.Sprintf(format, args...))
}

func (s *scenario) run(f []string) {
	tm := s.tm
	switch f[0] {
	case "servers":
		for _, name := range f[1:] {
			cs := tm.startCS(name, "r-"+name)
			s.servers[name], s.names[cs.addr] = cs, name
		}
	case "create":
		tm.create(alice, f[1])
	case "prepare":
		idx, _ := strconv.ParseInt(f[2], 10, 64)
		resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: f[1], Index: idx, Append: len(f) > 3})
		if err != nil {
			s.printf("error %s", chunkfs.KindOf(err))
			return
		}
		s.printf("v=%d replicas=%d primary=%s", resp.Chunk.Version, len(resp.Chunk.Replicas), s.names[resp.Chunk.Primary])
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			s.t.Fatal(err)
		}
		tm.clock.Advance(d)
	case "beat":
		s.beat(f[1:])
	case "collect":
		s.collect(f[1:])
	case "fail", "heal":
		cs := s.servers[f[1]]
		cs.mu.Lock()
		cs.fail = f[0] == "fail"
		cs.mu.Unlock()
	case "liveness":
		tm.m.checkLiveness()
	case "snapshot":
		resp, err := tm.c.MakeSnapshot(bg, &pb.SnapshotRequest{Caller: alice, Src: f[1], Dst: f[2]})
		if err != nil {
			s.printf("error %s", chunkfs.KindOf(err))
			return
		}
		s.printf("revoked=%d", resp.Revoked)
	case "chunk":
		idx, _ := strconv.ParseInt(f[2], 10, 64)
		var out string
		tm.m.state.read(func(ns *namespace.Namespace) {
			_, cs, err := ns.Chunks(chunkfs.Caller{}, f[1], idx, 1, false)
			if err != nil || len(cs) == 0 {
				out = fmt.Sprintf("error %v", err)
				return
			}
			out = fmt.Sprintf("handle=%d v=%d shared=%v", cs[0].Handle, cs[0].Version, cs[0].Shared)
		})
		s.printf("%s", out)
	case "delete":
		if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: alice, Path: f[1]}); err != nil {
			s.printf("error %s", chunkfs.KindOf(err))
		}
	case "restart":
		s.restart()
	default:
		s.t.Fatalf("unknown scenario command %q", f[0])
	}
}

func (s *scenario) beat(args []string) {
	extend := slices.Contains(args, "extend")
	for _, name := range args {
		cs := s.servers[name]
		if cs == nil {
			continue
		}
		req := &pb.HeartbeatRequest{Id: cs.id, Addr: cs.addr, Capacity: 1 << 40, Free: 1 << 39, Sample: cs.report()}
		if extend {
			for _, r := range cs.report() {
				req.ExtendLeases = append(req.ExtendLeases, r.Handle)
			}
		}
		resp, err := s.tm.c.Heartbeat(bg, req)
		if err != nil {
			s.t.Fatal(err)
		}
		if resp.Reregister {
			s.printf("%s: reregister", name)
		} else if extend || len(resp.Garbage) > 0 {
			s.printf("%s: extended=%d garbage=%d", name, len(resp.Extended), len(resp.Garbage))
		}
	}
}

func (s *scenario) collect(names []string) {
	for _, name := range names {
		cs := s.servers[name]
		resp, err := s.tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: cs.id, Addr: cs.addr, Capacity: 1 << 40, Free: 1 << 39, Sample: cs.report()})
		if err != nil {
			s.t.Fatal(err)
		}
		if len(resp.Garbage) == 0 {
			continue
		}
		slices.Sort(resp.Garbage)
		cs.mu.Lock()
		for _, h := range resp.Garbage {
			delete(cs.versions, h)
		}
		cs.mu.Unlock()
		s.printf("%s: deleted=%v", name, resp.Garbage)
	}
}

func (s *scenario) restart() {
	dir, clk := s.tm.cfg.Dir, s.tm.clock
	s.tm.close()
	s.tm = startMaster(s.t, dir, clk)
	names := make([]string, 0, len(s.servers))
	for name := range s.servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		reg := s.tm.register(s.servers[name], "r-"+name)
		if len(reg.Stale)+len(reg.Garbage) > 0 {
			s.printf("%s: stale=%d garbage=%d", name, len(reg.Stale), len(reg.Garbage))
		}
	}
}
