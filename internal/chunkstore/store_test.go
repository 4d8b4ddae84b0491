package chunkstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

func openStore(t *testing.T, fsys FS, dirs ...string) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Dirs = dirs
	if fsys != nil {
		cfg.FS = fsys
	}
	cfg.MaxChunkSize = 4 << 20
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func randBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// model is the expected contents of a chunk.
type model []byte

func (m *model) write(off int64, p []byte) {
	if end := off + int64(len(p)); end > int64(len(*m)) {
		*m = append(*m, make([]byte, end-int64(len(*m)))...)
	}
	copy((*m)[off:], p)
}

func readAll(t *testing.T, s *Store, h chunkfs.Handle) []byte {
	t.Helper()
	in, err := s.Info(h)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, in.Length+10)
	n, err := s.Read(h, 0, p)
	if err != io.EOF && !(err == nil && in.Length == 0) {
		t.Fatalf("Read whole chunk: n=%d err=%v", n, err)
	}
	return p[:n]
}

func TestWritesMatchModel(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   FS
		dir  string
	}{{"mem", NewMemFS(1 << 30), "/d"}, {"os", OS{}, t.TempDir()}} {
		t.Run(fsys.name, func(t *testing.T) {
			s := openStore(t, fsys.fs, fsys.dir)
			r := rand.New(rand.NewPCG(1, 2))
			if err := s.Create(7, 1); err != nil {
				t.Fatal(err)
			}
			var m model
			for i := 0; i < 200; i++ {
				var off int64
				n := r.IntN(3 * BlockSize)
				switch r.IntN(4) {
				case 0: // append
					off = int64(len(m))
				case 1: // small write inside one block
					n = r.IntN(100)
					off = r.Int64N(int64(len(m)) + 1)
				case 2: // beyond the end: a gap of zeros
					off = int64(len(m)) + r.Int64N(BlockSize)
				default:
					off = r.Int64N(int64(len(m)) + 1)
				}
				if off+int64(n) > 4<<20 {
					continue
				}
				p := randBytes(r, n)
				if err := s.Write(7, off, p); err != nil {
					t.Fatalf("write %d at %d: %v", n, off, err)
				}
				m.write(off, p)
				checkRandomRead(t, s, 7, m, r)
			}
			if got := readAll(t, s, 7); !bytes.Equal(got, m) {
				t.Fatalf("contents differ from model (len %d vs %d)", len(got), len(m))
			}
			// Reopen: metadata survives.
			s2 := openStore(t, fsys.fs, fsys.dir)
			if got := readAll(t, s2, 7); !bytes.Equal(got, m) {
				t.Fatal("contents differ after reopen")
			}
			if err := s2.Verify(7); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func checkRandomRead(t *testing.T, s *Store, h chunkfs.Handle, m model, r *rand.Rand) {
	t.Helper()
	off := r.Int64N(int64(len(m)) + 1)
	p := make([]byte, r.IntN(2*BlockSize+1))
	n, err := s.Read(h, off, p)
	want := m[off:min(int64(len(m)), off+int64(len(p)))]
	if n != len(want) || !bytes.Equal(p[:n], want) {
		t.Fatalf("Read(%d, %d) = %d bytes, want %d matching the model", off, len(p), n, len(want))
	}
	if n < len(p) && err != io.EOF || n == len(p) && err != nil {
		t.Fatalf("Read(%d, %d) err = %v", off, len(p), err)
	}
}

func TestReadWithSumsAreBlockSums(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	s.Create(1, 1)
	p := randBytes(rand.New(rand.NewPCG(3, 3)), 3*BlockSize+100)
	s.Write(1, 0, p)
	buf := make([]byte, 2*BlockSize)
	n, sums, err := s.ReadWithSums(1, 2*BlockSize, buf, nil)
	if err != io.EOF || n != BlockSize+100 || len(sums) != 2 {
		t.Fatalf("ReadWithSums = %d, %d sums, %v", n, len(sums), err)
	}
	if sums[0] != sumOf(buf[:BlockSize]) || sums[1] != sumOf(buf[BlockSize:n]) {
		t.Fatal("returned sums are not the block sums")
	}
}

func TestFlippedByteDetected(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(0x1234, 3)
	p := randBytes(rand.New(rand.NewPCG(4, 4)), 2*BlockSize)
	s.Write(0x1234, 0, p)
	if err := m.Corrupt("/d/34/0000000000001234.data", BlockSize+5); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := s.Read(0x1234, 0, buf); err != nil {
		t.Fatalf("good block: %v", err)
	}
	_, err := s.Read(0x1234, BlockSize+100, buf)
	if chunkfs.KindOf(err) != chunkfs.KindChecksum || !errors.Is(err, chunkfs.ErrChecksum) {
		t.Fatalf("read of flipped block: %v, want KindChecksum", err)
	}
	if _, err := s.Read(0x1234, 0, buf); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("corrupt chunk still served: %v", err)
	}
	if c := s.Corrupt(); len(c) != 1 || c[0] != 0x1234 {
		t.Fatalf("Corrupt() = %v", c)
	}
}

func TestPartialWriteVerifiesOldBlock(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(1, 1)
	s.Write(1, 0, make([]byte, BlockSize))
	m.Corrupt("/d/01/0000000000000001.data", 9)
	err := s.Write(1, 100, []byte("x"))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("write into a corrupt block: %v, want KindChecksum", err)
	}
}

func TestPadTruncateDelete(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	s.Create(5, 1)
	p := randBytes(rand.New(rand.NewPCG(5, 5)), BlockSize+10)
	s.Write(5, 0, p)
	if err := s.Pad(5, 3*BlockSize+1); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(p), make([]byte, 3*BlockSize+1-len(p))...)
	if got := readAll(t, s, 5); !bytes.Equal(got, want) {
		t.Fatal("pad: contents differ")
	}
	if err := s.Truncate(5, 100); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, 5); !bytes.Equal(got, p[:100]) {
		t.Fatal("truncate: contents differ")
	}
	s.Write(5, 100, []byte("abc"))
	if got := readAll(t, s, 5); !bytes.Equal(got, append(bytes.Clone(p[:100]), "abc"...)) {
		t.Fatal("append after truncate differs")
	}
	if err := s.Delete(5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(5, 0, make([]byte, 1)); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("read of deleted chunk: %v", err)
	}
	if s.Create(5, 2) != nil {
		t.Fatal("re-create after delete failed")
	}
}

func TestLimitsAndErrors(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	s.Create(1, 1)
	if k := chunkfs.KindOf(s.Create(1, 1)); k != chunkfs.KindExist {
		t.Errorf("double create: %v", k)
	}
	if k := chunkfs.KindOf(s.Write(1, 4<<20, []byte("x"))); k != chunkfs.KindTooLarge {
		t.Errorf("write past max chunk size: %v", k)
	}
	if k := chunkfs.KindOf(s.Write(1, -1, []byte("x"))); k != chunkfs.KindInvalid {
		t.Errorf("negative offset: %v", k)
	}
	if k := chunkfs.KindOf(s.Write(2, 0, []byte("x"))); k != chunkfs.KindNotExist {
		t.Errorf("unknown chunk: %v", k)
	}
	if _, err := s.Read(1, 0, make([]byte, 1)); err != io.EOF {
		t.Errorf("read of empty chunk: %v", err)
	}
}

func TestSeveralDirsSpreadAndReload(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	s := openStore(t, nil, a, b)
	for h := chunkfs.Handle(1); h <= 10; h++ {
		if err := s.Create(h, chunkfs.Version(h)); err != nil {
			t.Fatal(err)
		}
		s.Write(h, 0, []byte(fmt.Sprint(h)))
	}
	if s.perDir[0] != 5 || s.perDir[1] != 5 {
		t.Fatalf("chunks per dir = %v, want 5 and 5", s.perDir)
	}
	s2 := openStore(t, nil, a, b)
	list := s2.List()
	if len(list) != 10 {
		t.Fatalf("reloaded %d chunks", len(list))
	}
	for _, in := range list {
		if in.Version != chunkfs.Version(in.Handle) || in.Corrupt || in.Length != int64(len(fmt.Sprint(in.Handle))) {
			t.Errorf("reloaded %+v", in)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(a, "0?", "*.data")); len(matches) != 5 {
		t.Errorf("fan-out folders: %v", matches)
	}
}

func TestSetVersionDurable(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(9, 1)
	s.SetVersion(9, 4)
	m.Crash(0, 0)
	in, err := openStore(t, m, "/d").Info(9)
	if err != nil || in.Version != 4 {
		t.Fatalf("after crash: %+v, %v", in, err)
	}
}

// TestCrashNeverServesUncheckedBytes kills the store at every point of a
// sequence of writes (and tears each file write at several points); after
// recovery every read either returns bytes of a state the chunk really had
// or fails with KindChecksum, and a failing chunk is listed as corrupt.
func TestCrashNeverServesUncheckedBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	base := randBytes(r, 2*BlockSize+300)
	type step struct {
		off int64
		p   []byte
	}
	steps := []step{
		{int64(len(base)), randBytes(r, 5000)},       // append into the partial block
		{100, randBytes(r, 50)},                      // overwrite inside a block
		{BlockSize - 10, randBytes(r, BlockSize+20)}, // across blocks
	}
	states := []model{model(bytes.Clone(base))}
	for _, st := range steps {
		m := model(bytes.Clone(states[len(states)-1]))
		m.write(st.off, st.p)
		states = append(states, m)
	}
	outcomes := map[bool]int{}
	for keep := 0; keep < 3*len(steps)+2; keep++ {
		for _, torn := range []int{0, 1, 7, 4000, 1 << 20} {
			fsys := NewMemFS(1 << 30)
			s := openStore(t, fsys, "/d")
			s.Create(1, 1)
			s.Write(1, 0, base)
			s.Sync(1)
			for _, st := range steps {
				if err := s.Write(1, st.off, st.p); err != nil {
					t.Fatal(err)
				}
			}
			fsys.Crash(keep, torn)
			outcomes[checkRecovered(t, openStore(t, fsys, "/d"), states, fmt.Sprintf("keep=%d torn=%d", keep, torn))]++
		}
	}
	if outcomes[true] == 0 || outcomes[false] == 0 {
		t.Fatalf("outcomes %v: want both clean and corrupt recoveries", outcomes)
	}
}

func checkRecovered(t *testing.T, s *Store, states []model, what string) (corrupt bool) {
	in, err := s.Info(1)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	p := make([]byte, in.Length)
	n, err := s.Read(1, 0, p)
	if err != nil && err != io.EOF {
		if chunkfs.KindOf(err) != chunkfs.KindChecksum {
			t.Fatalf("%s: read error %v, want KindChecksum", what, err)
		}
		if c := s.Corrupt(); len(c) != 1 {
			t.Fatalf("%s: failing chunk not listed corrupt", what)
		}
		return true
	}
	for _, m := range states {
		if bytes.Equal(p[:n], m) {
			return false
		}
	}
	t.Fatalf("%s: served %d bytes matching no state the chunk had", what, n)
	return false
}

func sumOf(p []byte) uint32 { return checksum.Sum(p) }

func TestWriteWithSums(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	s.Create(1, 1)
	p := randBytes(rand.New(rand.NewPCG(7, 7)), 2*BlockSize+10)
	sums := checksum.Blocks(nil, p)
	if err := s.WriteWithSums(1, BlockSize, p, sums); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(1); err != nil {
		t.Fatalf("known sums stored wrongly: %v", err)
	}
	// The sums given are the ones stored: a wrong one is caught on read.
	s.Create(2, 1)
	sums[1]++
	s.WriteWithSums(2, 0, p, sums)
	if err := s.Verify(2); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("wrong known sum not used: %v", err)
	}
	// Unaligned offsets ignore them.
	s.Create(3, 1)
	s.WriteWithSums(3, 5, p, sums)
	if err := s.Verify(3); err != nil {
		t.Fatalf("sums used at an unaligned offset: %v", err)
	}
	// A write with known sums larger than a segment (written in one call),
	// ending inside a block of older data (read, merged, re-summed), and one
	// extending the chunk by a short last block.
	r := rand.New(rand.NewPCG(8, 8))
	s.Create(4, 1)
	want := randBytes(r, 1<<20+100)
	if err := s.Write(4, 0, want); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		off int64
		n   int
	}{{2 * BlockSize, 300<<10 + 7}, {BlockSize * 16, 200 << 10}} {
		q := randBytes(r, w.n)
		if err := s.WriteWithSums(4, w.off, q, checksum.Blocks(nil, q)); err != nil {
			t.Fatal(err)
		}
		if end := w.off + int64(w.n); end > int64(len(want)) {
			want = append(want, make([]byte, end-int64(len(want)))...)
		}
		copy(want[w.off:], q)
		got := make([]byte, len(want)+10)
		n, err := s.Read(4, 0, got)
		if err != io.EOF || !bytes.Equal(got[:n], want) {
			t.Fatalf("after writing %d bytes at %d with their sums: read %d bytes, %v, equal %v", w.n, w.off, n, err, bytes.Equal(got[:n], want))
		}
	}
}

// TestReader reads through a Reader as through the store, across writes,
// a truncate, corruption and deletion, and hands out its file only on the
// operating system's file system.
func TestReader(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(7, 2)
	p := randBytes(rand.New(rand.NewPCG(5, 5)), 3*BlockSize+100)
	s.Write(7, 0, p)
	r, err := s.OpenReader(7)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if in := r.Info(); in.Version != 2 || in.Length != int64(len(p)) {
		t.Fatalf("Info = %+v", in)
	}
	if r.File() != nil {
		t.Fatal("a MemFS chunk has an OS file")
	}
	buf := make([]byte, 2*BlockSize)
	n, sums, err := r.ReadWithSums(BlockSize, buf, nil)
	if err != nil || n != len(buf) || !bytes.Equal(buf, p[BlockSize:3*BlockSize]) || len(sums) != 2 || sums[1] != sumOf(p[2*BlockSize:3*BlockSize]) {
		t.Fatalf("ReadWithSums = %d, %d sums, %v", n, len(sums), err)
	}
	s.Write(7, 10, []byte("changed")) // seen by the open reader
	if n, _, err := r.ReadWithSums(0, buf[:20], nil); err != nil || string(buf[10:17]) != "changed" || n != 20 {
		t.Fatalf("after a write: %q, %v", buf[:20], err)
	}
	s.Truncate(7, 100)
	if n, _, err := r.ReadWithSums(50, buf, nil); err != io.EOF || n != 50 {
		t.Fatalf("after a truncate: %d, %v", n, err)
	}
	if _, _, err := r.ReadWithSums(-1, buf, nil); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("negative offset: %v", err)
	}
	m.Corrupt("/d/07/0000000000000007.data", 5)
	if _, _, err := r.ReadWithSums(0, buf[:10], nil); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("corrupt: %v", err)
	}
	if _, err := s.OpenReader(7); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("open of a corrupt chunk: %v", err)
	}
	s.Create(8, 1)
	s.Write(8, 0, p[:100])
	r8, err := s.OpenReader(8)
	if err != nil {
		t.Fatal(err)
	}
	defer r8.Close()
	s.Delete(8)
	s.Create(8, 1) // a new chunk of the same handle is not the reader's
	if _, _, err := r8.ReadWithSums(0, buf[:10], nil); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("deleted: %v", err)
	}
	if _, err := s.OpenReader(9); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("missing: %v", err)
	}

	disk := openStore(t, nil, t.TempDir())
	disk.Create(1, 1)
	disk.Write(1, 0, p)
	ro, err := disk.OpenReader(1)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.File() == nil {
		t.Fatal("an OS chunk has no file")
	}
	if _, err := ro.File().ReadAt(buf[:100], 0); err != nil || !bytes.Equal(buf[:100], p[:100]) {
		t.Fatalf("file: %v", err)
	}
}

// TestNewChunkSyncedOnlyBySync checks that creating a chunk costs no disk
// sync, that a crash before its first Sync leaves no chunk (not a corrupt
// one), and that data synced after the creation survives a crash.
func TestNewChunkSyncedOnlyBySync(t *testing.T) {
	m := NewMemFS(1 << 30)
	syncs := 0
	m.SetFault(func(op, name string) error {
		if op == "sync" {
			syncs++
		}
		return nil
	})
	s := openStore(t, m, "/d")
	if err := s.Create(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(2, 1); err != nil {
		t.Fatal(err)
	}
	if syncs != 0 {
		t.Fatalf("creating two chunks made %d syncs, want 0", syncs)
	}
	if err := s.Write(2, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(2); err != nil {
		t.Fatal(err)
	}
	if syncs != 2 {
		t.Fatalf("Sync of a new chunk made %d syncs, want 2 (data, metadata)", syncs)
	}
	m.SetFault(nil)
	m.Crash(0, 0)
	s = openStore(t, m, "/d")
	if _, err := s.Info(1); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("chunk created and never synced, after a crash: %v, want KindNotExist", err)
	}
	if c := s.Corrupt(); len(c) != 0 {
		t.Fatalf("corrupt after the crash: %v", c)
	}
	if names, _ := m.ReadDir(filepath.Dir(s.path(&chunk{handle: 1}, ""))); len(names) != 0 {
		t.Fatalf("files left of the chunk never synced: %v", names)
	}
	if got := readAll(t, s, 2); string(got) != "hello" {
		t.Fatalf("synced chunk after a crash: %q", got)
	}
}
