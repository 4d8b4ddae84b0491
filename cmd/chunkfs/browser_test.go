package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
)

// chromium returns Debian's chromium, or skips the test when it is absent
// outside CI (scripts/test.sh installs it; in CI its absence fails).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: scripts/test.sh installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); CI runs this test")
	return ""
}

// screenshotDir is where the browser test saves its screenshots:
// $CHUNKFS_SCREENSHOTS when set, else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("CHUNKFS_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestStatusPageInBrowser starts a cluster with its status page, writes
// files, and loads the page in headless chromium at a desktop and a phone
// size: Tables 2 and 3 are there, agree with `admin report --json`, the
// page fits the phone's width, and a link leads to a file's chunks.
func TestStatusPageInBrowser(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := newMasterStatus(httpFlags{addr: "127.0.0.1:0"}, &master.Config{})
	cfg := cluster.DefaultConfig()
	cfg.Dir, cfg.ChunkSize = t.TempDir(), 1<<20
	cfg.Master = status.configure
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var banner bytes.Buffer
	url, err := serveDevStatus(ctx, &env{stdout: &banner}, status, cl)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ctx, cl.MasterAddr())
	var rep client.Report
	out, err := exec.Command(binary, "--master", cl.MasterAddr(), "admin", "report", "--json").Output()
	if err != nil || json.Unmarshal(out, &rep) != nil {
		t.Fatalf("admin report --json: %v\n%s", err, out)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	dir := screenshotDir(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		err := chromedp.Do(bctx,
			chromedp.EmulateViewport(size.w, size.h),
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.CSS("#table2")),
		)
		if err != nil {
			t.Fatalf("%s: loading the page: %v", size.name, err)
		}
		table2 := inBrowser(t, bctx, chromedp.Text(chromedp.CSS("#table2")))
		table3 := inBrowser(t, bctx, chromedp.Text(chromedp.CSS("#table3")))
		fits := inBrowser(t, bctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		shot := inBrowser(t, bctx, chromedp.FullScreenshot(100))
		file := filepath.Join(dir, "master-"+size.name+".png")
		if err := os.WriteFile(file, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s screenshot: %s", size.name, file)
		for _, want := range []string{
			fmt.Sprintf("Chunkservers\t%d", len(rep.Servers)),
			fmt.Sprintf("Number of files\t%d", rep.Files),
			fmt.Sprintf("Number of chunks\t%d", rep.Chunks),
			"Number of dead files\t0",
		} {
			if !strings.Contains(flat(table2), want) {
				t.Errorf("%s: Table 2 lacks %q:\n%s", size.name, want, table2)
			}
		}
		if !strings.Contains(table2, "Metadata at master") || strings.Contains(table2, "not known") {
			t.Errorf("%s: Table 2 has no measured metadata at master:\n%s", size.name, table2)
		}
		for _, want := range []string{"Last minute", "Since restart", "Read rate", "Write rate", "Master ops"} {
			if !strings.Contains(table3, want) {
				t.Errorf("%s: Table 3 lacks %q:\n%s", size.name, want, table3)
			}
		}
		if strings.Contains(table3, "Write rate\t0 B/s") || strings.Contains(table3, "Read rate\t0 B/s") {
			t.Errorf("%s: Table 3 shows no writes after writing files:\n%s", size.name, table3)
		}
		if !fits {
			t.Errorf("%s: the page is wider than the screen", size.name)
		}
	}
	err = chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(url+"browse?path=/web"),
		chromedp.Click(chromedp.CSS(`a[href*="big"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chunks")),
	)
	if err != nil {
		t.Fatalf("following a file's link: %v", err)
	}
	chunks := inBrowser(t, bctx, chromedp.Text(chromedp.CSS("#chunks")))
	if n := strings.Count(chunks, cl.ChunkserverAddr(0)); n != 3 {
		t.Errorf("/web/big's chunks list chunkserver 0 %d times, want 3 (one replica of each chunk):\n%s", n, chunks)
	}
}

// writeFiles writes a few files, one of three chunks, as a user would.
func writeFiles(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	cc := client.DefaultConfig()
	cc.Master, cc.Caller = addr, chunkfs.Root
	c, err := client.New(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.MkdirAll(ctx, "/web", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"big": 3 << 20, "small": 1000, "empty": 0} {
		f, err := c.Create(ctx, "/web/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte("x"), n)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := c.Open(ctx, "/web/big")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := io.Copy(io.Discard, f); err != nil || n != 3<<20 {
		t.Fatalf("reading /web/big: %d bytes, %v", n, err)
	}
}

// flat joins a table's cells as chromium's innerText gives them: a tab
// between cells, a newline between rows.
func flat(s string) string { return strings.ReplaceAll(s, "\r", "") }

// inBrowser runs a in the browser and returns its value, or fails the test.
func inBrowser[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
