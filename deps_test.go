package chunkfs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/chunkfs/chunkfs"

// purePackages are the deterministic cores (STYLE.md habit 1): no disk,
// network, logging, clock reads or goroutines. Their callers pass time in
// as a value and own whatever I/O the result calls for.
var purePackages = []string{
	"/internal/namespace",
	"/internal/placement",
	"/internal/checksum",
	"/internal/locks",
	"/internal/status",
	"/internal/token",
}

// pureFiles are pure cores kept inside a shell package, as the glob of
// their files in its directory: the master's registry, the one owner of
// what the master knows of replicas (STYLE.md habit 14), called under the
// master's lock. Beside the rule above they import, of this module, only
// the vocabulary and pure packages.
var pureFiles = map[string]string{"/internal/master": "registry*.go"}

// stdlibOnly may import only the standard library and the vocabulary, but
// may read the clock: internal/clock is where the real clock lives.
var stdlibOnly = []string{"/internal/clock"}

// impureImports are the standard packages a pure package must not import:
// files, processes, the network, logs and raw system calls.
var impureImports = []string{"os", "net", "log", "syscall", "io/ioutil"}

// clockReads are the package time functions that read the wall clock or
// start timers; a pure package takes now as an argument instead.
var clockReads = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// TestImportRules enforces the layering of DESIGN.md §9: pure packages
// import only the standard library (and the vocabulary), each heavyweight
// dependency has one importer, servers never import each other, and the
// client links no server code.
func TestImportRules(t *testing.T) {
	const mod = module
	direct := goList(t, "{{.ImportPath}} {{join .Imports \" \"}}")
	deps := goList(t, "{{.ImportPath}} {{join .Deps \" \"}}")

	for _, p := range append(append([]string{}, purePackages...), stdlibOnly...) {
		for _, imp := range direct[mod+p] {
			if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && imp != mod {
				t.Errorf("pure package %s imports %s", p, imp)
			}
		}
	}
	only := map[string][]string{
		"github.com/hashicorp/raft":  {"/internal/oplog"},
		"google.golang.org/grpc":     {"/internal/rpc", "/internal/rpc/pb"},
		"github.com/hanwen/go-fuse/": {"/internal/fusefs"},
		"github.com/prometheus/":     {"/internal/metrics"},
		"gonum.org/v1/plot":          {"/internal/bench"},
	}
	for dep, allowed := range only {
		for pkg, imps := range direct {
			for _, imp := range imps {
				if strings.HasPrefix(imp, dep) && !contains(allowed, strings.TrimPrefix(pkg, mod)) {
					t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
				}
			}
		}
	}
	never := map[string][]string{
		"/internal/master":      {"/internal/chunkserver", "/internal/chunkstore"},
		"/internal/chunkserver": {"/internal/master", "/internal/namespace", "/internal/oplog"},
		"/client":               {"/internal/master", "/internal/chunkserver", "/internal/oplog", "/internal/namespace", "/internal/chunkstore", "/internal/cluster"},
	}
	for pkg, banned := range never {
		for _, d := range deps[mod+pkg] {
			for _, b := range banned {
				if d == mod+b {
					t.Errorf("%s depends on %s", pkg, b)
				}
			}
		}
	}
	for pkg, imps := range direct {
		for _, imp := range imps {
			if imp == mod+"/internal/cluster" && !contains([]string{"/chunkfstest", "/cmd/chunkfs"}, strings.TrimPrefix(pkg, mod)) {
				t.Errorf("%s imports internal/cluster, which is for tests", pkg)
			}
		}
	}
}

func goList(t *testing.T, format string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPurePackages parses every non-test file of each pure package, and
// the pure files of a shell, and fails on an impure import, a clock read
// or a go statement.
func TestPurePackages(t *testing.T) {
	srcs := goList(t, "{{.ImportPath}} {{.Dir}} {{join .GoFiles \" \"}}")
	for _, p := range purePackages {
		src := srcs[module+p]
		if len(src) < 2 {
			t.Errorf("pure package %s not found by go list", p)
			continue
		}
		fset, files := parseFiles(t, src[0], src[1:], parser.SkipObjectResolution)
		for _, v := range pureViolations(fset, files) {
			t.Errorf("pure package %s: %s", p, v)
		}
	}
	for p, glob := range pureFiles {
		src := srcs[module+p]
		if len(src) < 2 {
			t.Fatalf("package %s not found by go list", p)
		}
		var names []string
		for _, name := range src[1:] {
			if ok, _ := filepath.Match(glob, name); ok {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			t.Errorf("no file of %s matches %s", p, glob)
		}
		fset, files := parseFiles(t, src[0], names, parser.SkipObjectResolution)
		for _, v := range pureViolations(fset, files) {
			t.Errorf("pure files %s/%s: %s", p, glob, v)
		}
		for _, f := range files {
			for _, spec := range f.Imports {
				path, _ := strconv.Unquote(spec.Path.Value)
				if rel, ok := strings.CutPrefix(path, module+"/"); ok && !contains(purePackages, "/"+rel) {
					t.Errorf("pure files %s/%s: %s imports %s, not a pure package", p, glob, fset.Position(spec.Pos()), path)
				}
			}
		}
	}
}

// TestPureRuleCatchesViolations runs the checker on synthetic sources, so
// the rule is known to fail when it should.
func TestPureRuleCatchesViolations(t *testing.T) {
	cases := []struct {
		name, src string
		want      int
	}{
		{"clean", "package p\nimport \"time\"\nfunc F(now time.Time) time.Time { return now.Add(time.Second) }", 0},
		{"os", "package p\nimport \"os\"\nfunc F() { os.Exit(1) }", 1},
		{"net/http", "package p\nimport _ \"net/http\"", 1},
		{"slog", "package p\nimport \"log/slog\"\nvar L = slog.Default()", 1},
		{"os/exec and syscall", "package p\nimport (\n\"os/exec\"\n\"syscall\"\n)\nvar _ = exec.Command\nvar _ = syscall.Getpid", 2},
		{"time.Now", "package p\nimport \"time\"\nfunc F() time.Time { return time.Now() }", 1},
		{"renamed time", "package p\nimport t \"time\"\nvar clock = t.Now", 1},
		{"time.Sleep", "package p\nimport \"time\"\nfunc F() { time.Sleep(1) }", 1},
		{"goroutine", "package p\nfunc F(c chan int) { go func() { c <- 1 }() }", 1},
		{"a method named Now", "package p\ntype c struct{}\nfunc (c) Now() int { return 0 }\nfunc F(x c) int { return x.Now() }", 0},
	}
	for _, c := range cases {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, c.name+".go", c.src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := pureViolations(fset, []*ast.File{f}); len(got) != c.want {
			t.Errorf("%s: %d violations %q, want %d", c.name, len(got), got, c.want)
		}
	}
}

// TestPureDocsMatchRule keeps the package comments and the rule in step:
// every package in purePackages says in its package comment that it is
// pure, and every package whose comment says it is pure is checked.
func TestPureDocsMatchRule(t *testing.T) {
	claims := regexp.MustCompile(`\b(It|package) is (pure|the pure)\b|\bis the pure\b`)
	srcs := goList(t, "{{.ImportPath}} {{.Dir}} {{join .GoFiles \" \"}}")
	for pkg, src := range srcs {
		if len(src) < 2 {
			continue
		}
		_, files := parseFiles(t, src[0], src[1:], parser.PackageClauseOnly|parser.ParseComments)
		var doc strings.Builder
		for _, f := range files {
			doc.WriteString(strings.Join(strings.Fields(f.Doc.Text()), " "))
		}
		rel := strings.TrimPrefix(pkg, module)
		listed := contains(purePackages, rel)
		switch {
		case listed && !claims.MatchString(doc.String()):
			t.Errorf("%s is checked as pure but its package comment does not say it is pure", pkg)
		case !listed && claims.MatchString(doc.String()):
			t.Errorf("%s says it is pure; add it to purePackages in deps_test.go", pkg)
		}
	}
}

// parseFiles parses the named files of dir.
func parseFiles(t *testing.T, dir string, names []string, mode parser.Mode) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// pureViolations lists what makes files impure: importing a package of
// impureImports (or one below it, as net/http or log/slog), naming a
// clock-reading function of package time, or a go statement.
func pureViolations(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		timeName := ""
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			for _, bad := range impureImports {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					out = append(out, fmt.Sprintf("%s: imports %s", fset.Position(spec.Pos()), path))
				}
			}
			if path == "time" {
				timeName = "time"
				if spec.Name != nil {
					timeName = spec.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				out = append(out, fmt.Sprintf("%s: starts a goroutine", fset.Position(n.Pos())))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && clockReads[n.Sel.Name] {
					out = append(out, fmt.Sprintf("%s: reads the clock (time.%s)", fset.Position(n.Pos()), n.Sel.Name))
				}
			}
			return true
		})
	}
	return out
}
