package bench

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPublicAPIOnly: the benchmark drives the cluster through the
// client library and the root package, as any application would: no wire
// types (internal/rpc, pb), no server package, no internal package at all
// (the testbed's certificates come from `chunkfs cert`).
func TestImportsPublicAPIOnly(t *testing.T) {
	const mod = "github.com/chunkfs/chunkfs"
	allowed := map[string]bool{mod: true, mod + "/client": true}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, mod) && !allowed[path] {
				t.Errorf("%s imports %s: the benchmark uses the public client API", name, path)
			}
		}
	}
}
