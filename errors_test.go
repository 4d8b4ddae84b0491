package chunkfs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestErrorIs(t *testing.T) {
	cases := []struct {
		kind Kind
		want error
	}{
		{KindNotExist, fs.ErrNotExist},
		{KindExist, fs.ErrExist},
		{KindPermission, fs.ErrPermission},
		{KindInvalid, fs.ErrInvalid},
		{KindNotEmpty, ErrNotEmpty},
		{KindChecksum, ErrChecksum},
		{KindNotSupported, ErrUnsupported},
	}
	for _, c := range cases {
		err := fmt.Errorf("wrapped: %w", E("op", "/p", c.kind, ""))
		if !errors.Is(err, c.want) {
			t.Errorf("errors.Is(%v, %v) = false", err, c.want)
		}
		if KindOf(err) != c.kind {
			t.Errorf("KindOf(%v) = %v, want %v", err, KindOf(err), c.kind)
		}
	}
	if errors.Is(E("op", "", KindExist, ""), fs.ErrNotExist) {
		t.Error("KindExist must not match fs.ErrNotExist")
	}
}

func TestErrorString(t *testing.T) {
	if got := E("create", "/a", KindExist, "").Error(); got != "create /a: file exists" {
		t.Errorf("got %q", got)
	}
	if got := E("create", "/a", KindInvalid, "name too long").Error(); got != "create /a: name too long" {
		t.Errorf("got %q", got)
	}
	if Kind(200).Valid() || !KindNotLeader.Valid() {
		t.Error("Valid wrong")
	}
}
