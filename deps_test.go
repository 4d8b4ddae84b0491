package chunkfs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces the layering of DESIGN.md §9: pure packages
// import only the standard library (and the vocabulary), each heavyweight
// dependency has one importer, servers never import each other, and the
// client links no server code.
func TestImportRules(t *testing.T) {
	const mod = "github.com/chunkfs/chunkfs"
	direct := goList(t, "{{.ImportPath}} {{join .Imports \" \"}}")
	deps := goList(t, "{{.ImportPath}} {{join .Deps \" \"}}")

	pure := []string{"/internal/namespace", "/internal/placement", "/internal/checksum", "/internal/clock"}
	for _, p := range pure {
		for _, imp := range direct[mod+p] {
			if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && imp != mod && !strings.HasPrefix(imp, mod+"/internal/clock") {
				t.Errorf("pure package %s imports %s", p, imp)
			}
		}
	}
	only := map[string][]string{
		"github.com/hashicorp/raft":  {"/internal/oplog"},
		"google.golang.org/grpc":     {"/internal/rpc", "/internal/rpc/pb"},
		"github.com/hanwen/go-fuse/": {"/internal/fusefs"},
		"github.com/prometheus/":     {"/internal/metrics"},
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
