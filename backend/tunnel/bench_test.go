package tunnel

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	agenttunnel "github.com/nimbus-build/nimbus/agent/tunnel"
)

// BenchmarkTunnelEcho is a keystroke's round trip: one byte written to an open echo stream and
// read back, through the tunnel of this replica (direct) and through two replicas, B → A →
// agent → A → B (two-replicas; it needs Redis). It reports the p50 and p99 of the round trips
// in µs. The target for a keystroke echo through the server and the tunnel is a p99
// under 30 ms; the tunnel's share must be a small part of it.
//
//	go test -run='^$' -bench='^BenchmarkTunnelEcho$' -benchtime=2000x ./backend/tunnel
func BenchmarkTunnelEcho(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		ag := &agents{}
		r := newReplica(b, ag, Config{})
		a := startAgent(b, ag, r)
		waitConnected(b, r, a, nil)
		benchEcho(b, r, a.id)
	})
	b.Run("two-replicas", func(b *testing.B) {
		rdb := sharedRedis(b)
		ag := &agents{}
		ra, rb := newReplica(b, ag, Config{Redis: rdb}), newReplica(b, ag, Config{Redis: rdb})
		a := startAgent(b, ag, ra)
		waitConnected(b, ra, a, nil)
		benchEcho(b, rb, a.id)
	})
}

func benchEcho(b *testing.B, r *replica, agentID string) {
	conn, err := r.hub.Open(context.Background(), agentID, Header{Kind: "echo"})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	key, got := []byte{'x'}, make([]byte, 1)
	rtts := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := conn.Write(key); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, got); err != nil {
			b.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	b.ReportMetric(micros(percentile(rtts, 50)), "p50-µs")
	b.ReportMetric(micros(percentile(rtts, 99)), "p99-µs")
	b.ReportMetric(0, "ns/op") // the percentiles say it better
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkTunnelThroughput moves 256 MiB over one stream, to the agent and from it, and
// compares the rate with the same copy over a plain loopback TCP connection (the same buffer
// sizes on both). The target is at least 70% of TCP's rate.
//
//	go test -run='^$' -bench='^BenchmarkTunnelThroughput$' -benchtime=3x ./backend/tunnel
func BenchmarkTunnelThroughput(b *testing.B) {
	const size = 256 << 20
	ag := &agents{}
	r := newReplica(b, ag, Config{})
	a := startAgent(b, ag, r, func(c *agenttunnel.Config) { c.Dial, c.ServerURL = nil, r.srv.URL })
	waitConnected(b, r, a, nil)
	for _, dir := range []struct{ name, kind string }{{"to-agent", "bench-sink"}, {"from-agent", "bench-source"}} {
		b.Run(dir.name, func(b *testing.B) {
			var tunnel, tcp time.Duration
			for b.Loop() {
				tunnel += timeTransfer(b, func() (net.Conn, error) {
					return r.hub.Open(context.Background(), a.id, Header{Kind: dir.kind, Fields: map[string]string{"bytes": itoa(size)}})
				}, dir.kind == "bench-sink", size)
				tcp += timeTCP(b, dir.kind == "bench-sink", size)
			}
			rate := func(d time.Duration) float64 { return float64(b.N) * size / (1 << 20) / d.Seconds() }
			b.ReportMetric(rate(tunnel), "tunnel-MiB/s")
			b.ReportMetric(rate(tcp), "tcp-MiB/s")
			b.ReportMetric(100*rate(tunnel)/rate(tcp), "%-of-tcp")
		})
	}
}

// copyBuf is the buffer size of every copy of the throughput benchmark.
const copyBuf = 256 << 10

// timeTransfer opens a stream and times size bytes over it: written when up (then the far end
// answers when it has them all), else read.
func timeTransfer(b *testing.B, open func() (net.Conn, error), up bool, size int64) time.Duration {
	start := time.Now()
	conn, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if up {
		if err := send(conn, size); err != nil {
			b.Fatal(err)
		}
		closeWrite(conn)
		if ack, err := io.ReadAll(conn); err != nil || string(ack) != itoa(size) {
			b.Fatalf("the far end read %q bytes (%v), want %d", ack, err, size)
		}
	} else if n, err := drain(conn); err != nil || n != size {
		b.Fatalf("read %d bytes (%v), want %d", n, err, size)
	}
	return time.Since(start)
}

// timeTCP is timeTransfer over a fresh loopback TCP connection.
func timeTCP(b *testing.B, up bool, size int64) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if up {
			n, _ := drain(c)
			io.WriteString(c, itoa(n))
		} else {
			send(c, size)
		}
	}()
	return timeTransfer(b, func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }, up, size)
}

func send(w io.Writer, size int64) error {
	buf := make([]byte, copyBuf)
	for i := range buf {
		buf[i] = byte(i)
	}
	for size > 0 {
		n, err := w.Write(buf[:min(int64(len(buf)), size)])
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		size -= int64(n)
	}
	return nil
}

func drain(r io.Reader) (int64, error) {
	buf := make([]byte, copyBuf)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
