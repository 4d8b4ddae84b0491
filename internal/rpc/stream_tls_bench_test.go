package rpc

import (
	"bufio"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"hash/crc32"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
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

// BenchmarkAESGCM measures the cipher of TLS 1.3 between chunkfs
// processes (TLS_AES_128_GCM_SHA256, which Go picks where the CPU has AES
// instructions) on one core: sealing and opening full 16 KiB records, as
// a TLS connection moving bulk data does, against the CRC32C every byte
// of the data path pays with or without TLS, as a reference measured in
// the same run. Besides the wall-clock MB/s it reports cpu-MB/s, the
// bytes per second of the thread's own CPU time (getrusage), which other
// load on the machine does not lower: at a rate R, one hop of the data
// path costs R/seal + R/open of a core.
//
//	go test ./internal/rpc -run '^$' -bench AESGCM -benchtime 30000x -count 3
func BenchmarkAESGCM(b *testing.B) {
	const record = 16 << 10
	key, nonce := make([]byte, 16), make([]byte, 12)
	block, err := aes.NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	plain := testData(record, 4)
	sealed := aead.Seal(nil, nonce, plain, nil)
	dst := make([]byte, 0, record+aead.Overhead())
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, bc := range []struct {
		name string
		op   func()
	}{
		{"seal", func() { aead.Seal(dst[:0], nonce, plain, nil) }},
		{"open", func() {
			if _, err := aead.Open(dst[:0], nonce, sealed, nil); err != nil {
				b.Fatal(err)
			}
		}},
		{"crc32c", func() { crc32.Checksum(plain, tab) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(record)
			start := threadCPU(b)
			for range b.N {
				bc.op()
			}
			if cpu := threadCPU(b) - start; cpu > 0 { // counted in scheduler ticks: give -benchtime 30000x
				b.ReportMetric(float64(b.N)*record/1e6/cpu.Seconds(), "cpu-MB/s")
			}
		})
	}
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Skipf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// BenchmarkTLSPipe is the floor of TLS on loopback with no chunkfs
// protocol: 64 MiB written in 8 MiB writes over one connection and read
// into an 8 MiB buffer, plain TCP and TLS 1.3 in turn in each iteration,
// reported as compareTLS does. BenchmarkStreamTLS's ratios are to be read
// against this one's.
func BenchmarkTLSPipe(b *testing.B) {
	const total, op = 64 << 20, 8 << 20
	pki := newTestPKI(b)
	node, user := pki.security(nodeID, time.Hour), pki.security(clientID, time.Hour)
	pipe := func(server func(net.Conn) net.Conn, client func(net.Conn) net.Conn, flush func() error) func(*testing.B) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { lis.Close() })
		go func() {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			sc, buf := server(c), make([]byte, op)
			for {
				if _, err := sc.Read(buf); err != nil {
					return
				}
			}
		}()
		raw, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conn := client(raw)
		b.Cleanup(func() { conn.Close() })
		data := testData(op, 5)
		return func(b *testing.B) {
			for range total / op {
				if _, err := conn.Write(data); err != nil {
					b.Fatal(err)
				}
				if flush != nil {
					if err := flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	same := func(c net.Conn) net.Conn { return c }
	plain := pipe(same, same, nil)
	server := func(c net.Conn) net.Conn { return tls.Server(c, node.ServerConfig()) }
	secure := pipe(server, func(c net.Conn) net.Conn { return tls.Client(c, user.ClientConfig("127.0.0.1:1")) }, nil)
	b.Run("one-write-per-record", func(b *testing.B) { compareTLS(b, total, plain, secure) })
	var bw *bufio.Writer
	batched := pipe(server, func(c net.Conn) net.Conn {
		bw = bufio.NewWriterSize(c, 256<<10)
		wc := &writerConn{Conn: c, w: bw, direct: true}
		tc := tls.Client(wc, user.ClientConfig("127.0.0.1:1"))
		if err := tc.Handshake(); err != nil {
			b.Fatal(err)
		}
		wc.direct = false
		return tc
	}, func() error { return bw.Flush() })
	b.Run("records-batched-256KiB", func(b *testing.B) { compareTLS(b, total, plain, batched) })
}

// writerConn is a connection whose writes go to w, unless direct.
type writerConn struct {
	net.Conn
	w      *bufio.Writer
	direct bool
}

func (c *writerConn) Write(p []byte) (int, error) {
	if c.direct {
		return c.Conn.Write(p)
	}
	return c.w.Write(p)
}

// BenchmarkTLSHandshake measures what a new connection costs: a mutual
// BenchmarkTLSHandshake: a TLS 1.3 handshake (ECDSA P-256 certificates,
// verified on both sides, the revocation list checked) with its
// acknowledgement, client and server in this process over loopback: full
// (each dial from a process with no session to resume) and resumed (a
// session of the process's last connection, as a chunkserver's second
// connection to a peer). cpu-ms/op is the process's CPU time (getrusage)
// per handshake, both sides together, which the other load on the machine
// does not inflate as it does ns/op.
func BenchmarkTLSHandshake(b *testing.B) {
	pki := newTestPKI(b)
	srv := startSecure(b, pki.security(nodeID, time.Hour), newMemHandler())
	go func() {
		for {
			c, err := srv.raft.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	master := pki.security(masterID, time.Hour)
	for _, bc := range []struct {
		name   string
		resume bool
	}{{"full", false}, {"resumed", true}} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := master.DialRaft(srv.addr, 10*time.Second); err != nil { // a session to resume
				b.Fatal(err)
			}
			var ru0, ru1 syscall.Rusage
			resumed := 0
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for range b.N {
				if !bc.resume {
					master.sessions = tls.NewLRUClientSessionCache(1)
				}
				c, err := master.DialRaft(srv.addr, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().DidResume {
					resumed++
				}
				c.Close()
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			if want := map[bool]int{false: 0, true: b.N}[bc.resume]; resumed != want {
				b.Fatalf("%d of %d handshakes resumed, want %d", resumed, b.N, want)
			}
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
