package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chunkfs/chunkfs"
)

// fileJSON is how --json prints a file's metadata.
type fileJSON struct {
	Path        string    `json:"path"`
	Name        string    `json:"name"`
	Type        string    `json:"type"` // file, dir or symlink
	Size        int64     `json:"size"`
	Mode        string    `json:"mode"` // octal permission bits
	Perm        string    `json:"perm"` // as ls -l shows them
	UID         uint32    `json:"uid"`
	GID         uint32    `json:"gid"`
	Replication int       `json:"replication,omitempty"`
	Chunks      int64     `json:"chunks,omitempty"`
	Inode       uint64    `json:"inode"`
	Nlink       uint32    `json:"nlink"` // names of a file (hard links); 2 + subdirectories for a directory
	MTime       time.Time `json:"mtime"`
	ATime       time.Time `json:"atime"`
	Target      string    `json:"target,omitempty"`
}

func toJSON(p string, fi *chunkfs.FileInfo) fileJSON {
	return fileJSON{
		Path: p, Name: path.Base(p), Type: fileType(fi.FileMode), Size: fi.Length,
		Mode: fmt.Sprintf("%04o", uint32(fi.FileMode.Perm())|specialBits(fi.FileMode)),
		Perm: fi.FileMode.String(), UID: fi.UID, GID: fi.GID, Replication: fi.Replication,
		Chunks: fi.Chunks, Inode: fi.Inode, Nlink: fi.Nlink, MTime: fi.MTime.UTC(), ATime: fi.ATime.UTC(), Target: fi.Target,
	}
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "file"
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// longLine formats fi as one line of ls -l: mode, the file's replication
// factor (its target, as hdfs dfs -ls shows; "-" for a directory; chunks
// and fsck show the live replicas), owner, group, size, modification time
// in UTC, name.
func longLine(fi *chunkfs.FileInfo, name string) string {
	repl := "-"
	if !fi.IsDir() {
		repl = fmt.Sprint(fi.Replication)
	}
	line := fmt.Sprintf("%s %2s %-6d %-6d %12d %s %s", fi.FileMode.String(), repl, fi.UID, fi.GID,
		fi.Length, fi.MTime.UTC().Format("2006-01-02 15:04"), quoteName(name))
	if fi.Target != "" {
		line += " -> " + quoteName(fi.Target)
	}
	return line
}

// humanSize formats n bytes with a binary unit, as du -h does.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(n)/float64(div), "KMGTPE"[exp])
}

// writeJSONLine prints v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// quoteName returns a name as it is safe to print on a terminal: as it is
// when every character is printable, otherwise in the shell's $'…' quoting
// (as GNU ls shows such names), so a newline or an escape sequence in a
// name can neither break a listing into lines nor drive the terminal.
func quoteName(name string) string {
	if printable(name) {
		return name
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, name[i])
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80 && strings.ContainsRune("\a\b\t\n\v\f\r", r):
			b.WriteString(`\` + string("abtnvfr"[strings.IndexRune("\a\b\t\n\v\f\r", r)]))
		default:
			for _, c := range []byte(name[i : i+size]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
		i += size
	}
	b.WriteByte('\'')
	return b.String()
}

// printable reports whether s is valid UTF-8 of printable characters.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
