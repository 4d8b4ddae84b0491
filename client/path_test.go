package client

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

func TestCheckPath(t *testing.T) {
	good := map[string]string{
		"/":         "/",
		"/a":        "/a",
		"/a//b/":    "/a/b",
		"/a/./b/..": "/a",
		"/../a":     "/a",
	}
	for in, want := range good {
		got, err := checkPath("op", in)
		if err != nil || got != want {
			t.Errorf("checkPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]chunkfs.Kind{
		"":                             chunkfs.KindInvalid,
		"a/b":                          chunkfs.KindInvalid,
		"./a":                          chunkfs.KindInvalid,
		"/a\x00b":                      chunkfs.KindInvalid,
		"/" + strings.Repeat("n", 256): chunkfs.KindTooLarge,
		"/" + strings.Repeat("a/", chunkfs.MaxPathLen/2+1): chunkfs.KindTooLarge,
	}
	for in, kind := range bad {
		_, err := checkPath("op", in)
		if chunkfs.KindOf(err) != kind || !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("checkPath(%.20q) = %v; want kind %v wrapping fs.ErrInvalid", in, err, kind)
		}
	}
}
