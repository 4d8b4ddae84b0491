package rpc

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkStreamTLS measures what mutual TLS costs the data stream on
// loopback: each iteration moves the same bytes through a plain-TCP
// server and a TLS one, in turn, and the benchmark reports the MB/s of
// each and TLS as a percentage of plain (tls-pct-of-plain), from the
// median iteration of each, so run it with -benchtime=5x or more. Reads
// come from memory (read), from a chunk file (readfile: plain sends it
// with sendfile, TLS with ordinary writes), and pushes go along a chain
// of three replicas (push).
func BenchmarkStreamTLS(b *testing.B) {
	const total, op = 64 << 20, 8 << 20
	pki := newTestPKI(b)
	node, user := pki.security(nodeID, time.Hour), pki.security(clientID, time.Hour)
	plainC, tlsC := NewDataClient(), user.NewDataClient()
	b.Cleanup(func() { plainC.Close(); tlsC.Close() })
	read := func(c *DataClient, addr string) func(b *testing.B) {
		p := make([]byte, op)
		return func(b *testing.B) {
			for off := int64(0); off < total; off += op {
				if _, err := c.Read(context.Background(), addr, 1, 1, off, p); err != nil {
					b.Fatal(err)
				}
			}
		}
	}

	b.Run("read", func(b *testing.B) {
		h := newMemHandler()
		h.chunks[1] = memChunk{version: 1, data: testData(total, 1)}
		plain, _ := startStream(b, h)
		secure := startSecure(b, node, h).addr
		compareTLS(b, total, read(plainC, plain), read(tlsC, secure))
	})
	b.Run("readfile", func(b *testing.B) {
		h := fileChunks{benchDir(b)}
		if err := os.WriteFile(h.path(1), testData(total, 3), 0o644); err != nil {
			b.Fatal(err)
		}
		plain, _ := startStream(b, h)
		secure := startSecure(b, node, h).addr
		compareTLS(b, total, read(plainC, plain), read(tlsC, secure))
	})
	b.Run("push", func(b *testing.B) {
		var plain, secure []string
		for range 3 {
			a, _ := startStream(b, newMemHandler())
			plain = append(plain, a)
			secure = append(secure, startSecure(b, node, newMemHandler()).addr)
		}
		data := testData(op, 2)
		push := func(c *DataClient, chain []string) func(b *testing.B) {
			return func(b *testing.B) {
				for range total / op {
					if err := c.Push(context.Background(), chain, 1, data); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		compareTLS(b, total, push(plainC, plain), push(tlsC, secure))
	})
}

// compareTLS runs plain and tls, which each move n bytes, once per
// iteration, and reports their median rates and the ratio of the medians.
func compareTLS(b *testing.B, n int64, plain, tls func(*testing.B)) {
	plain(b) // warm the connection pools up
	tls(b)
	b.SetBytes(n)
	var tp, tt []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		plain(b)
		tp = append(tp, time.Since(start))
		start = time.Now()
		tls(b)
		tt = append(tt, time.Since(start))
	}
	mp, mt := median(tp), median(tt)
	b.ReportMetric(float64(n)/1e6/mp.Seconds(), "plain-MB/s")
	b.ReportMetric(float64(n)/1e6/mt.Seconds(), "tls-MB/s")
	b.ReportMetric(100*mp.Seconds()/mt.Seconds(), "tls-pct-of-plain")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchDir is a directory for chunk files: on /dev/shm when it exists, so
// the disk does not take part.
func benchDir(b *testing.B) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "chunkfs-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}
