package main

import (
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressReader wraps r with a progress bar on stderr for a transfer of
// total bytes (-1 if unknown), shown only when stdout is a terminal and only
// once the transfer has taken more than a second.
func progressReader(e *env, r io.Reader, total int64, desc string) io.Reader {
	if !e.stdoutTTY {
		return r
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(&delayedWriter{w: e.stderr, start: time.Now(), delay: time.Second}),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
	)
	return &barReader{r: r, bar: bar}
}

// barReader advances a bar as it reads and finishes it at the end.
type barReader struct {
	r   io.Reader
	bar *progressbar.ProgressBar
}

func (b *barReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.bar.Add(n)
	if err == io.EOF {
		b.bar.Finish()
	}
	return n, err
}

// delayedWriter drops output until delay has passed since start, so quick
// transfers show no bar.
type delayedWriter struct {
	w     io.Writer
	start time.Time
	delay time.Duration

	mu      sync.Mutex // guards started
	started bool
}

func (d *delayedWriter) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.started && time.Since(d.start) < d.delay {
		return len(p), nil
	}
	d.started = true
	return d.w.Write(p)
}
