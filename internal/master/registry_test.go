package master

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// TestRegistryScenarios runs the transcripts in testdata/registry against
// the registry alone: pure state, no RPC, no clock but the one the
// transcript moves. Each command is followed by "> " lines with what it
// must print.
//
//	servers a b c:r1      live servers (rack r-NAME unless :RACK), with room
//	full d / room d       d's free space is nil / plenty
//	chunk 1 v=1 want=3    a chunk of the namespace (length 1000 unless len=N)
//	version 1 2           the log moves chunk 1 to version 2
//	want 1 4              chunk 1's file's replication becomes 4
//	holds 1 a b           a and b hold chunk 1 at its logged version
//	lease 1 a [60s]       a holds chunk 1's lease for 10s (or as given)
//	grantable 1           the lease decision: valid, wait, none or grant A,B [fenced]
//	grant 1 a b           the grant's calls to a and b succeed at the next version, logged
//	advance 10s           move the clock
//	beat a b              heartbeats (no sample)
//	sample a 1:1 2:1      a heartbeat of a sampling chunk 1 at version 1, 2 at 1: "garbage=[...]"
//	dead                  declare servers silent for 30s dead: "dead A B"
//	plan [full]           plan repairs: "clone H vV live=N SRC->DST", "trim H SRV",
//	                      "revoke H" (a lease the master is to revoke first),
//	                      "fence H" (a lost primary's lease the master is to fence first),
//	                      "leave H" (replicas held back the master is to leave stale first)
//	revoke 1 a            the revocation's calls to a succeed at the next version, logged
//	fence 1 a             the same calls, fencing a lost primary's lease (registry.fencing)
//	leave 1 a b           the same calls, leaving replicas held back stale (registry.leaving)
//	                      (ties between equal targets go by the registry's seeded rng)
//	done 1 ok|fail|exists|newer|gone|timeout  chunk 1's clone in flight ends (gone: the source
//	                      has no such chunk; timeout: it ran into its deadline)
//	health 1              "live=N cloning=B corrupt=N"
//	register c 1:1 2:1    a full report: "stale=[...] garbage=[...]"
//	unreachable 1 a       a writer reported chunk 1's primary a, and the probe failed
//	secondary 1 c         a writer's attempt failed at secondary c, and so did the probe: "out" or "kept"
//	nospace 1 b           the probe after a writer's failure found b's replica of chunk 1 out of
//	                      space (a minimum of 2): "out" (taken out of the lease) or "kept"
//	corrupt a 1           a's replica of chunk 1 failed its checksum
//	delete 1              the chunk is deleted
//	garbage a             what a is told to delete at its next heartbeat
//	space a 600/1000      a reports 600 bytes used of 1000 of capacity
//	drain a b             a and b are being decommissioned (the logged set)
//	choose 3              servers for a new chunk, in ID order
//	progress a            "STATE chunks=N remaining=N"
//	balance on [T]|off    start (threshold T points) or stop the rebalancer
//	balance               "running=B threshold=T in-flight=N moved=N bytes=N spread=S"
//	                      (plan prints a move as "move H vV live=N SRC->DST")
//	hold 30s              a new leader holds its predecessor's leases on every chunk for 30s
//	reports a 1:1:8s      a's latest report: it holds chunk 1's lease at version 1, 8s left
//	adopt 1               the leader tries to adopt chunk 1's reported lease: "adopted A for D" or "wait"
//	extend a 1            a asks to extend its lease on chunk 1: "extended [...]"
//	no-adoption           adoption switched off (NoLeaseAdoption)
func TestRegistryScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/registry/*.txt")
	if len(files) == 0 {
		t.Fatal("no registry scenarios")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runRegistryScenario(t, file) })
	}
}

type nsChunk struct {
	v      chunkfs.Version
	want   int
	length int64
	dead   bool
}

type registryScenario struct {
	t      *testing.T
	r      *registry
	now    time.Time
	chunks map[chunkfs.Handle]*nsChunk
	out    []string
}

func runRegistryScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reg := newRegistry(1)
	reg.configureBalance(false, DefaultBalanceThreshold, 2) // transcripts start it when they test it
	s := &registryScenario{t: t, r: reg, now: time.Unix(1_700_000_000, 0), chunks: map[chunkfs.Handle]*nsChunk{}}
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

func (s *registryScenario) printf(format string, args ...any) {
	s.out = append(s.out, fmt.Sprintf(format, args...))
}

func (s *registryScenario) version(h chunkfs.Handle) (chunkfs.Version, bool) {
	c := s.chunks[h]
	if c == nil {
		return 0, false
	}
	return c.v, true
}

func (s *registryScenario) lookup(h chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) {
	c := s.chunks[h]
	if c == nil {
		return 0, 0, 0, false, false
	}
	return c.v, c.want, c.length, c.dead, true
}

func (s *registryScenario) server(name string) *server {
	sv := s.r.servers[name]
	if sv == nil {
		s.t.Fatalf("no server %s", name)
	}
	return sv
}

func (s *registryScenario) handle(arg string) chunkfs.Handle {
	h, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		s.t.Fatal(err)
	}
	return chunkfs.Handle(h)
}

func (s *registryScenario) duration(arg string) time.Duration {
	d, err := time.ParseDuration(arg)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func names(servers []*server) string {
	var out []string
	for _, sv := range servers {
		out = append(out, sv.id)
	}
	return strings.Join(out, ",")
}

func (s *registryScenario) run(f []string) {
	r := s.r
	switch f[0] {
	case "servers":
		for _, arg := range f[1:] {
			name, rack, ok := strings.Cut(arg, ":")
			if !ok {
				rack = "r-" + name
			}
			if _, err := r.register(fullReport{figures: figures{id: name, addr: name + ":1", rack: rack, capacity: 1 << 40, free: 1 << 39}}, s.version, s.now); err != nil {
				s.t.Fatal(err)
			}
		}
	case "full", "room":
		s.server(f[1]).free = map[bool]int64{true: 0, false: 1 << 39}[f[0] == "full"]
	case "chunk":
		c := &nsChunk{length: 1000}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "v":
				c.v = chunkfs.Version(n)
			case "want":
				c.want = int(n)
			case "len":
				c.length = n
			case "dead": // only files in the trash hold it
				c.dead = n != 0
			}
		}
		s.chunks[s.handle(f[1])] = c
	case "want":
		n, _ := strconv.Atoi(f[2])
		s.chunks[s.handle(f[1])].want = n
	case "version":
		n, _ := strconv.ParseUint(f[2], 10, 64)
		s.chunks[s.handle(f[1])].v = chunkfs.Version(n)
	case "holds":
		h := s.handle(f[1])
		for _, name := range f[2:] {
			r.addReplica(s.server(name), h, s.chunks[h].v)
		}
	case "lease":
		d := 10 * time.Second
		if len(f) > 3 {
			var err error
			if d, err = time.ParseDuration(f[3]); err != nil {
				s.t.Fatal(err)
			}
		}
		r.recordLease(s.handle(f[1]), s.server(f[2]), s.now.Add(d), s.now)
	case "grantable":
		h := s.handle(f[1])
		d := r.grantable(h, s.chunks[h].v, s.now)
		switch d.verdict {
		case leaseValid:
			s.printf("valid")
		case leaseWait:
			s.printf("wait")
		case leaseNone:
			s.printf("none")
		default:
			s.printf("grant %s%s", names(d.replicas), map[bool]string{true: " fenced"}[d.fenced])
		}
	case "grant":
		h := s.handle(f[1])
		var order []*server
		for _, name := range f[2:] {
			order = append(order, s.server(name))
		}
		v := r.nextVersion(h, s.chunks[h].v)
		r.noteTold(h, v)
		errs := make([]error, len(order))
		r.recordTaken(h, v, order, errs)
		s.chunks[h].v = v
		r.recordLease(h, order[0], s.now.Add(10*time.Second), s.now)
		s.printf("v=%d", v)
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			s.t.Fatal(err)
		}
		s.now = s.now.Add(d)
	case "beat":
		for _, name := range f[1:] {
			sv := s.server(name)
			if b := r.heartbeat(beat{figures: figures{id: sv.id, addr: sv.addr, capacity: sv.capacity, used: sv.used, free: sv.free}}, s.version, s.now, 10*time.Second, true); b.reregister {
				s.printf("%s: reregister", name)
			}
		}
	case "sample":
		sv := s.server(f[1])
		req := beat{figures: figures{id: sv.id, addr: sv.addr, capacity: sv.capacity, used: sv.used, free: sv.free}}
		for _, hv := range f[2:] {
			hs, vs, _ := strings.Cut(hv, ":")
			v, _ := strconv.ParseUint(vs, 10, 64)
			req.sample = append(req.sample, replica{handle: s.handle(hs), version: chunkfs.Version(v)})
		}
		b := r.heartbeat(req, s.version, s.now, 10*time.Second, true)
		s.printf("garbage=%v", b.garbage)
	case "deleted": // deleted NAME [follower] H...: a heartbeat telling replicas deleted
		sv := s.server(f[1])
		leads, hs := true, f[2:]
		if len(hs) > 0 && hs[0] == "follower" {
			leads, hs = false, hs[1:]
		}
		req := beat{figures: figures{id: sv.id, addr: sv.addr, capacity: sv.capacity, used: sv.used, free: sv.free}}
		for _, h := range hs {
			req.deleted = append(req.deleted, s.handle(h))
		}
		b := r.heartbeat(req, s.version, s.now, 10*time.Second, leads)
		s.printf("garbage=%v", b.garbage)
	case "dead":
		if dead := r.markDead(s.now, 30*time.Second); len(dead) > 0 {
			s.printf("dead %s", strings.ReplaceAll(names(dead), ",", " "))
		}
	case "plan":
		clones, trims := r.plan(placement.DefaultConfig(), s.lookup, 2, s.now, len(f) > 1 && f[1] == "full")
		slices.SortFunc(clones, func(a, b cloneOrder) int { return int(a.handle) - int(b.handle) })
		for _, c := range clones {
			s.printf("%s %d v%d live=%d %s->%s", map[bool]string{false: "clone", true: "move"}[c.move], c.handle, c.version, c.live, c.source.id, c.target.id)
		}
		slices.SortFunc(trims, func(a, b trimOrder) int { return int(a.handle) - int(b.handle) })
		for _, t := range trims {
			s.printf("trim %d %s", t.handle, t.server.id)
		}
		for _, h := range r.revoking {
			s.printf("revoke %d", h)
		}
		for _, h := range r.fencing {
			s.printf("fence %d", h)
		}
		for _, h := range r.leaving {
			s.printf("leave %d", h)
		}
	case "revoke", "fence", "leave":
		h := s.handle(f[1])
		var order []*server
		for _, name := range f[2:] {
			order = append(order, s.server(name))
		}
		v := r.nextVersion(h, s.chunks[h].v)
		r.noteTold(h, v)
		r.revoke(h)
		r.recordTaken(h, v, order, make([]error, len(order)))
		s.chunks[h].v = v
		if f[0] == "leave" {
			r.movedOn(h)
		}
		s.printf("v=%d", v)
	case "done":
		h := s.handle(f[1])
		ci := r.chunks.get(h)
		if ci == nil || r.clones[h] == nil {
			s.t.Fatalf("no clone of %d in flight", h)
		}
		var err error
		switch f[2] {
		case "ok":
		case "exists": // the target holds the chunk at the version cloned
			err = chunkfs.E("clone", "", chunkfs.KindExist, "replica held")
		case "newer": // the target holds a newer version
			err = chunkfs.E("clone", "", chunkfs.KindStale, "replica held at a newer version")
		case "gone": // the source holds no such chunk
			err = chunkfs.E("clone", "", chunkfs.KindNotExist, "no such chunk")
		case "timeout": // it ran into its deadline
			err = fmt.Errorf("%w: %w", errStalled, chunkfs.E("clone", "", chunkfs.KindUnavailable, "deadline exceeded"))
		default:
			err = errors.New("clone failed")
		}
		c := s.chunks[h]
		var v chunkfs.Version
		if c != nil {
			v = c.v
		}
		pc := r.clones[h]
		counted, trimmed := r.cloneDone(h, pc, 1000, err, v, c != nil, s.now)
		if trimmed {
			s.printf("counted=%v trimmed %s", counted, pc.source.id)
		} else {
			s.printf("counted=%v", counted)
		}
	case "health":
		h := s.handle(f[1])
		hl := r.health(h, s.chunks[h].v)
		s.printf("live=%d cloning=%v corrupt=%d", hl.live, hl.cloning, hl.corrupt)
	case "register":
		req := fullReport{figures: figures{id: f[1], addr: f[1] + ":1", rack: "r-" + f[1], capacity: 1 << 40, free: 1 << 39}}
		for _, hv := range f[2:] {
			hs, vs, _ := strings.Cut(hv, ":")
			v, _ := strconv.ParseUint(vs, 10, 64)
			req.chunks = append(req.chunks, replica{handle: s.handle(hs), version: chunkfs.Version(v)})
		}
		d, err := r.register(req, s.version, s.now)
		if err != nil {
			s.t.Fatal(err)
		}
		s.printf("stale=%v garbage=%v", d.stale, d.garbage)
	case "unreachable":
		h := s.handle(f[1])
		if p := r.primaryAt(h, s.server(f[2]).addr, s.now); p != nil {
			r.dropPrimary(h, p, s.now)
		}
	case "secondary":
		h := s.handle(f[1])
		s.printf("%s", map[bool]string{true: "out", false: "kept"}[r.dropSecondary(h, s.chunks[h].v, s.server(f[2]), 2, s.now)])
	case "nospace":
		h := s.handle(f[1])
		s.printf("%s", map[bool]string{true: "out", false: "kept"}[r.dropFull(h, s.chunks[h].v, s.server(f[2]), 2, s.now)])
	case "corrupt":
		r.corrupt(s.server(f[1]), s.handle(f[2]), s.now)
	case "delete":
		h := s.handle(f[1])
		delete(s.chunks, h)
		r.forget([]chunkfs.Handle{h}, s.now)
	case "garbage":
		s.printf("%v", r.takeGarbage(s.server(f[1])))
	case "space":
		used, capacity, _ := strings.Cut(f[2], "/")
		sv := s.server(f[1])
		sv.used, _ = strconv.ParseInt(used, 10, 64)
		sv.capacity, _ = strconv.ParseInt(capacity, 10, 64)
	case "drain":
		r.setDraining(f[1:])
	case "choose":
		n, _ := strconv.Atoi(f[1])
		got, err := r.choose(placement.DefaultConfig(), n, s.now, nil)
		if err != nil {
			s.printf("%v", err)
			break
		}
		slices.SortFunc(got, func(a, b *server) int { return cmpString(a.id, b.id) })
		s.printf("%s", names(got))
	case "progress":
		p := r.progress(s.server(f[1]), s.lookup)
		s.printf("%s chunks=%d remaining=%d", p.state, p.chunks, p.remaining)
	case "balance":
		if len(f) == 1 {
			b := r.balanceStatus(placement.DefaultConfig(), s.now)
			s.printf("running=%v threshold=%g in-flight=%d moved=%d bytes=%d spread=%.1f", b.running, b.threshold, b.inFlight, b.moved, b.bytes, b.spread)
			break
		}
		t := 0.0
		if len(f) > 2 {
			t, _ = strconv.ParseFloat(f[2], 64)
		}
		r.setBalance(f[1] == "on", t)
	case "hold":
		r.setHold(s.now.Add(s.duration(f[1])), chunkfs.Handle(1<<62))
	case "reports":
		var leases []heldReport
		for _, arg := range f[2:] {
			parts := strings.Split(arg, ":")
			v, _ := strconv.ParseUint(parts[1], 10, 64)
			leases = append(leases, heldReport{handle: s.handle(parts[0]), version: chunkfs.Version(v), left: s.duration(parts[2])})
		}
		r.recordHeld(s.server(f[1]), leases, s.now)
	case "adopt":
		h := s.handle(f[1])
		if !r.adopt(h, s.chunks[h].v, s.now) {
			s.printf("wait")
			break
		}
		l := r.leases[h]
		s.printf("adopted %s for %v", l.primary.id, r.timeOf(l.expiry).Sub(s.now))
	case "extend":
		s.printf("extended %v", r.extend(s.server(f[1]), []chunkfs.Handle{s.handle(f[2])}, s.now, 10*time.Second))
	case "no-adoption":
		r.adoption.on = false
	default:
		s.t.Fatalf("unknown registry command %q", f[0])
	}
}

// TestNoSpaceMarksFull: a server whose Lease call failed for want of
// space gets no new replica until its next heartbeat reports room.
func TestNoSpaceMarksFull(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(2000, 0)
	order := []*server{r.servers["cs01"], r.servers["cs02"]}
	r.forgetFailed(7, order, []error{chunkfs.E("lease", "", chunkfs.KindNoSpace, "disk full"), nil}, now)
	cfg := placement.DefaultConfig()
	for range 10 {
		got, err := r.choose(cfg, 3, now, nil)
		if err != nil || len(got) != 2 || slices.Contains(got, order[0]) {
			t.Fatalf("chose %v (%v) with cs01 full", names(got), err)
		}
	}
}

// TestHeartbeatAdoptsOnlyOnTheLeader: every master records the leases a
// heartbeat reports, only the leader adopts them; an adopted lease is
// fenced, so not extended.
func TestHeartbeatAdoptsOnlyOnTheLeader(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(2000, 0)
	s := r.servers["cs01"]
	for _, x := range r.sorted() {
		r.addReplica(x, 7, 4)
	}
	version := func(h chunkfs.Handle) (chunkfs.Version, bool) { return 4, h == 7 }
	r.setHold(now.Add(30*time.Second), 100)
	b := beat{figures: figures{id: s.id, addr: s.addr}, extend: []chunkfs.Handle{7},
		leases: []heldReport{{handle: 7, version: 4, left: 20 * time.Second}}}
	if got := r.heartbeat(b, version, now, 10*time.Second, false); len(got.adopted) > 0 || len(got.extended) > 0 {
		t.Fatalf("a follower adopted %v and extended %v", got.adopted, got.extended)
	}
	if l, _ := s.reported(7); l.version != 4 {
		t.Fatalf("follower: report %+v", l)
	}
	if p, _ := r.lease(7, now); p != nil {
		t.Fatalf("follower: lease on record %v", p)
	}
	got := r.heartbeat(b, version, now, 10*time.Second, true)
	if !slices.Equal(got.adopted, []chunkfs.Handle{7}) || len(got.extended) != 0 {
		t.Fatalf("leader: adopted %v, extended %v; want [7] and none", got.adopted, got.extended)
	}
}

// TestReplacedServerForgetsItsAwayReplicas: a server replaced at its
// address by another holds no replica that can come back: what it held
// back is forgotten (the record would be kept for it).
func TestReplacedServerForgetsItsAwayReplicas(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(2000, 0)
	for _, s := range r.sorted() {
		r.addReplica(s, 7, 4)
	}
	r.recordLease(7, r.servers["cs01"], now.Add(time.Minute), now)
	old := r.servers["cs03"]
	r.doubt(old, 7, now)
	if !r.heldBack(old, 7, 4) {
		t.Fatal("cs03, out of the set under a lease, is not held back")
	}
	version := func(h chunkfs.Handle) (chunkfs.Version, bool) { return 4, h == 7 }
	if _, err := r.register(fullReport{figures: figures{id: "cs09", addr: old.addr, capacity: 1 << 40, free: 1 << 39}}, version, now); err != nil {
		t.Fatal(err)
	}
	if len(r.away) != 0 {
		t.Errorf("replicas held back after their server was replaced: %v", r.away)
	}
}
