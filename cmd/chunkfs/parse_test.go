package main

import (
	"flag"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsAnywhere(t *testing.T) {
	e := &env{stdout: io.Discard, cmd: &command{name: "ls"}}
	fset := flagSet(e)
	long := fset.Bool("l", false, "")
	rec := fset.Bool("R", false, "")
	master := fset.String("master", "", "")
	ops, err := parse(e, fset, []string{"/a", "-lR", "--master", "h:1", "/b", "--", "-c"})
	if err != nil {
		t.Fatal(err)
	}
	if !*long || !*rec || *master != "h:1" || !slices.Equal(ops, []string{"/a", "/b", "-c"}) {
		t.Fatalf("l=%v R=%v master=%q ops=%q", *long, *rec, *master, ops)
	}
	if _, err := parse(e, flag.NewFlagSet("x", flag.ContinueOnError), []string{"-zz"}); !isUsage(err) {
		t.Fatalf("unknown flag: %v, want a usage error", err)
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]fs.FileMode{"644": 0o644, "0755": 0o755, "1777": 0o777 | fs.ModeSticky, "4750": 0o750 | fs.ModeSetuid} {
		if got, err := parseMode(s); err != nil || got != want {
			t.Errorf("parseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "8", "x", "17777"} {
		if _, err := parseMode(s); err == nil {
			t.Errorf("parseMode(%q) accepted", s)
		}
	}
}

func TestParseOwner(t *testing.T) {
	cases := map[string][2]int{"12": {12, -1}, "12:34": {12, 34}, ":34": {-1, 34}, "root:0": {0, 0}}
	for s, want := range cases {
		u, g, err := parseOwner(s)
		if err != nil || u != want[0] || g != want[1] {
			t.Errorf("parseOwner(%q) = %d, %d, %v; want %v", s, u, g, err, want)
		}
	}
	for _, s := range []string{"", ":", "no-such-user-xyz"} {
		if _, _, err := parseOwner(s); err == nil {
			t.Errorf("parseOwner(%q) accepted", s)
		}
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0K", 1536: "1.5K", 5 << 20: "5.0M", 3 << 30: "3.0G"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestGlobalMaster(t *testing.T) {
	for _, args := range [][]string{{"--master", "h:1", "ls", "/"}, {"-master=h:1", "ls", "/"}} {
		e := &env{}
		rest, err := globalFlags(e, args)
		if err != nil || e.master != "h:1" || !slices.Equal(rest, []string{"ls", "/"}) {
			t.Errorf("globalFlags(%q) = %q, %v; master %q", args, rest, err, e.master)
		}
	}
	if _, err := globalFlags(&env{}, []string{"--master"}); err == nil {
		t.Error("--master without a value accepted")
	}
}

func TestDelayedWriter(t *testing.T) {
	var out strings.Builder
	quiet := &delayedWriter{w: &out, start: time.Now(), delay: time.Hour}
	quiet.Write([]byte("hidden"))
	shown := &delayedWriter{w: &out, start: time.Now().Add(-2 * time.Second), delay: time.Second}
	shown.Write([]byte("shown"))
	if out.String() != "shown" {
		t.Fatalf("output %q, want only what came after the delay", out.String())
	}
}

func TestProgressOnlyOnTerminal(t *testing.T) {
	r := strings.NewReader("data")
	if got := progressReader(&env{stderr: io.Discard}, r, 4, "x"); got != io.Reader(r) {
		t.Fatal("a progress bar was added though stdout is not a terminal")
	}
	e := &env{stderr: io.Discard, stdoutTTY: true}
	b, err := io.ReadAll(progressReader(e, strings.NewReader("data"), 4, "x"))
	if err != nil || string(b) != "data" {
		t.Fatalf("through the bar: %q, %v", b, err)
	}
}

// FuzzParse: any command line parses or fails with a usage error, without
// panicking, and operands keep their order.
func FuzzParse(f *testing.F) {
	f.Add("ls\x00-lR\x00/a\x00--master\x00h:1")
	f.Add("--\x00-x\x00--master=")
	f.Add("-l-\x00-")
	f.Fuzz(func(t *testing.T, line string) {
		e := &env{stdout: io.Discard, cmd: &command{name: "ls"}}
		fset := flagSet(e)
		fset.Bool("l", false, "")
		fset.Bool("R", false, "")
		fset.String("master", "", "")
		ops, err := parse(e, fset, strings.Split(line, "\x00"))
		if err != nil && !isUsage(err) && err != flag.ErrHelp {
			t.Fatalf("parse error %v is neither usage nor help", err)
		}
		for _, op := range ops {
			if !strings.Contains(line, op) {
				t.Fatalf("operand %q not in the input", op)
			}
		}
	})
}

// TestBenchChunkSizeFlags: --chunk-size sets the reads' and appends' file
// system, --write-chunk-size the writes' (default 1 MiB, 0: the same);
// negative sizes are refused.
func TestBenchChunkSizeFlags(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		chunk, write int64
		bad          bool
	}{
		{nil, 0, 1 << 20, false},
		{[]string{"--chunk-size", "8388608"}, 8 << 20, 1 << 20, false},
		{[]string{"--write-chunk-size", "0"}, 0, 0, false},
		{[]string{"--write-chunk-size", "4194304", "--quick"}, 0, 4 << 20, false},
		{[]string{"--write-chunk-size", "-5"}, 0, 0, true},
		{[]string{"--chunk-size", "-1"}, 0, 0, true},
		{[]string{"--write-chunk-size", "1M"}, 0, 0, true},
	} {
		cfg, _, _, err := benchFlags(tc.args)
		if (err != nil) != tc.bad {
			t.Errorf("%v: err %v, want failure %v", tc.args, err, tc.bad)
			continue
		}
		if !tc.bad && (cfg.ChunkSize != tc.chunk || cfg.WriteChunkSize != tc.write) {
			t.Errorf("%v: chunk sizes %d and %d, want %d and %d", tc.args, cfg.ChunkSize, cfg.WriteChunkSize, tc.chunk, tc.write)
		}
	}
}

func TestBenchWarmupFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--quick"}, true}, {[]string{"--warmup=false"}, false}} {
		cfg, _, _, err := benchFlags(tc.args)
		if err != nil || cfg.Warmup != tc.want {
			t.Errorf("%v: warmup %v, %v; want %v", tc.args, cfg.Warmup, err, tc.want)
		}
	}
}

func TestParseGroup(t *testing.T) {
	got, err := parseGroup("m1=10.0.0.1:7070, m2=10.0.0.2:7070")
	if err != nil || len(got) != 2 || got[1].ID != "m2" || got[1].Addr != "10.0.0.2:7070" {
		t.Fatalf("parseGroup = %+v, %v", got, err)
	}
	for _, bad := range []string{"m1", "=a:1", "m1=", "m1=nohost", "m1=a:1,,m2=b:1"} {
		if _, err := parseGroup(bad); !isUsage(err) {
			t.Errorf("parseGroup(%q) = %v, want a usage error", bad, err)
		}
	}
	if _, _, err := masterFlags([]string{"--dir", t.TempDir(), "--observer"}); !isUsage(err) {
		t.Errorf("--observer without --cluster: %v, want a usage error", err)
	}
	cfg, _, err := masterFlags([]string{"--dir", t.TempDir(), "--id", "m2", "--cluster", "m1=a:1,m2=b:2"})
	if err != nil || cfg.Addr != "b:2" || len(cfg.Members) != 2 {
		t.Fatalf("masterFlags of a group member: %+v, %v; want its --cluster address", cfg.Addr, err)
	}
}

func TestTokenFlags(t *testing.T) {
	cfg, _, err := masterFlags([]string{"--dir", t.TempDir(), "--token-key-period", "2h", "--token-lifetime", "30m"})
	if err != nil || cfg.TokenKeyPeriod != 2*time.Hour || cfg.TokenLifetime != 30*time.Minute {
		t.Fatalf("token flags: %v, %v, %v", cfg.TokenKeyPeriod, cfg.TokenLifetime, err)
	}
	if cfg, _, _ := masterFlags([]string{"--dir", t.TempDir()}); cfg.TokenKeyPeriod != 10*time.Hour || cfg.TokenLifetime != time.Hour {
		t.Fatalf("token defaults: %v, %v", cfg.TokenKeyPeriod, cfg.TokenLifetime)
	}
}

func TestMasterBalanceFlags(t *testing.T) {
	cfg, _, err := masterFlags([]string{"--dir", t.TempDir()})
	if err != nil || !cfg.Balance || cfg.BalanceThreshold != 10 || cfg.BalanceMaxMoves != 4 {
		t.Fatalf("defaults: balance %v threshold %v moves %v, %v", cfg.Balance, cfg.BalanceThreshold, cfg.BalanceMaxMoves, err)
	}
	cfg, _, err = masterFlags([]string{"--dir", t.TempDir(), "--balance=false", "--balance-threshold", "5", "--balance-moves", "8"})
	if err != nil || cfg.Balance || cfg.BalanceThreshold != 5 || cfg.BalanceMaxMoves != 8 {
		t.Fatalf("set: balance %v threshold %v moves %v, %v", cfg.Balance, cfg.BalanceThreshold, cfg.BalanceMaxMoves, err)
	}
	for _, bad := range [][]string{{"--balance-threshold", "0"}, {"--balance-threshold", "100"}, {"--balance-moves", "0"}} {
		if _, _, err := masterFlags(append([]string{"--dir", t.TempDir()}, bad...)); !isUsage(err) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

func TestSuperuserGroupFlag(t *testing.T) {
	cfg, _, err := masterFlags([]string{"--dir", t.TempDir()})
	if err != nil || cfg.SuperuserGroup != 0 {
		t.Fatalf("default superuser group %d, %v; want 0", cfg.SuperuserGroup, err)
	}
	cfg, _, err = masterFlags([]string{"--dir", t.TempDir(), "--superuser-group", "4242"})
	if err != nil || cfg.SuperuserGroup != 4242 {
		t.Fatalf("--superuser-group 4242: %d, %v", cfg.SuperuserGroup, err)
	}
	for _, bad := range []string{"-1", "4294967296", "wheel"} {
		if _, _, err := masterFlags([]string{"--dir", t.TempDir(), "--superuser-group", bad}); !isUsage(err) {
			t.Errorf("--superuser-group %s: %v, want a usage error", bad, err)
		}
	}
}
