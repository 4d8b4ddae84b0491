package web

import (
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// Browser bounds.
const (
	maxPathLen    = 4096 // longer paths are refused before any call
	maxDirEntries = 1000 // entries listed of one directory
	maxChunkRows  = 1000 // chunks listed of one file
)

// browsePage is what the browse template shows: a directory's entries or
// a file's chunks.
type browsePage struct {
	Title   string
	Path    string
	Crumbs  []crumb
	Info    *chunkfs.FileInfo
	Entries []entry
	More    int // entries or chunks not listed
	Chunks  []client.ChunkInfo
}

type crumb struct{ Name, Path string }

type entry struct {
	Name, Path string
	Dir        bool
	Size       int64
}

func (m *Master) browse(w http.ResponseWriter, r *http.Request) {
	p, ok := browsePath(w, r)
	if !ok {
		return
	}
	ctx, cancel := m.ctx(r)
	defer cancel()
	fi, err := m.cfg.Source.Stat(ctx, p)
	if err != nil {
		sourceError(w, err)
		return
	}
	page := browsePage{Title: "chunkfs " + p, Path: p, Crumbs: crumbs(p), Info: fi}
	if fi.IsDir() {
		ents, err := m.cfg.Source.ReadDir(ctx, p)
		if err != nil {
			sourceError(w, err)
			return
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		if len(ents) > maxDirEntries {
			page.More, ents = len(ents)-maxDirEntries, ents[:maxDirEntries]
		}
		for _, e := range ents {
			en := entry{Name: e.Name(), Path: path.Join(p, e.Name()), Dir: e.IsDir()}
			if info, err := e.Info(); err == nil {
				en.Size = info.Size()
			}
			page.Entries = append(page.Entries, en)
		}
	} else if fi.Mode().IsRegular() {
		chunks, err := m.cfg.Source.Chunks(ctx, p)
		if err != nil {
			sourceError(w, err)
			return
		}
		if len(chunks) > maxChunkRows {
			page.More, chunks = len(chunks)-maxChunkRows, chunks[:maxChunkRows]
		}
		page.Chunks = chunks
	}
	render(w, m.cfg.Logger, "browse.html", page)
}

// browsePath is the path a browse request names: absolute, clean, at most
// maxPathLen bytes. It answers 400 for any other.
func browsePath(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query()
	if len(q["path"]) > 1 {
		problem(w, http.StatusBadRequest, "give one path")
		return "", false
	}
	p := q.Get("path")
	switch {
	case p == "":
		p = "/"
	case len(p) > maxPathLen:
		problem(w, http.StatusRequestURITooLong, "path longer than %d bytes", maxPathLen)
		return "", false
	case !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0):
		problem(w, http.StatusBadRequest, "path must be absolute and contain no NUL byte")
		return "", false
	}
	return path.Clean(p), true
}

// sourceError answers a failed cluster call with the status its kind
// means.
func sourceError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	switch chunkfs.KindOf(err) {
	case chunkfs.KindNotExist:
		code = http.StatusNotFound
	case chunkfs.KindPermission:
		code = http.StatusForbidden
	case chunkfs.KindInvalid, chunkfs.KindNotDir, chunkfs.KindTooLarge:
		code = http.StatusBadRequest
	}
	problem(w, code, "%v", err)
}

// crumbs are the links to each directory above p, the root first.
func crumbs(p string) []crumb {
	out := []crumb{{Name: "/", Path: "/"}}
	if p == "/" {
		return out
	}
	cur := ""
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur += "/" + part
		out = append(out, crumb{Name: part, Path: cur})
	}
	return out
}
