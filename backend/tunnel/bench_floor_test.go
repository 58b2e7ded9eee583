package tunnel

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkRelayFloor is the most a preview can get on this machine, whatever Nimbus does: a
// 1 GiB download from an HTTP server (sendfile, as busybox httpd in the workspace bench), made
// straight from its port and through two relays with nothing of Nimbus's in them, the shape
// every preview has (browser → server → agent → container port):
//
//   - "agent": accepts TCP and copies to the origin's port with io.Copy, which Linux splices
//     (socket → pipe → socket: the bytes never enter the process);
//   - "server": an HTTP server that writes the request to the agent relay, reads the response
//     head and splices the body into the browser's connection (ReadFrom), or, for the second
//     figure, httputil.ReverseProxy with 256 KiB buffers (one copy in and out of user space).
//
// Both relays and both ends share the machine's cores (2 in CI), so the ratio is CPU per byte:
// three TCP traversals and four splices against one traversal. Run with -benchtime=1x; each
// figure is the median of 3 downloads.
func BenchmarkRelayFloor(b *testing.B) {
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "file"))
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		b.Fatal(err)
	}
	f.Close()
	origin := serve(b, http.FileServer(http.Dir(dir)))
	agent := listen(b)
	go spliceRelay(agent, origin)
	front := serve(b, spliceFront(agent.Addr().String()))
	u, _ := url.Parse("http://" + agent.Addr().String())
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.BufferPool = floorBuffers{}
	proxy := serve(b, rp)

	for range b.N {
		var direct, spliced, copied []time.Duration
		for range 3 {
			direct = append(direct, floorDownload(b, origin.Addr().String()))
			spliced = append(spliced, floorDownload(b, front.Addr().String()))
			copied = append(copied, floorDownload(b, proxy.Addr().String()))
		}
		d, s, c := median(direct), median(spliced), median(copied)
		b.ReportMetric(1024/d.Seconds(), "direct-MiB/s")
		b.ReportMetric(100*d.Seconds()/s.Seconds(), "spliced-%-of-direct")
		b.ReportMetric(100*d.Seconds()/c.Seconds(), "reverseproxy-%-of-direct")
		b.Logf("1 GiB: direct %.0f MiB/s; two splicing relays %.0f MiB/s (%.0f %%); the server relay as httputil.ReverseProxy %.0f MiB/s (%.0f %%)",
			1024/d.Seconds(), 1024/s.Seconds(), 100*d.Seconds()/s.Seconds(), 1024/c.Seconds(), 100*d.Seconds()/c.Seconds())
	}
}

func listen(tb testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

func serve(tb testing.TB, h http.Handler) net.Listener {
	ln := listen(tb)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return ln
}

// spliceRelay is the agent's hop at its best: TCP to TCP, spliced both ways.
func spliceRelay(ln net.Listener, to net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			t, err := net.Dial("tcp", to.Addr().String())
			if err != nil {
				return
			}
			defer t.Close()
			go io.Copy(t, c)
			io.Copy(c, t)
		}()
	}
}

// spliceFront is the server's hop at its best: the response body spliced into the browser's
// connection.
func spliceFront(to string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer c.Close()
		if err := r.Write(c); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, r)
		if err != nil || resp.ContentLength < 0 {
			http.Error(w, "no response of known length", http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		head, _ := br.Peek(br.Buffered())
		w.Write(head)
		w.(http.Flusher).Flush()
		w.(io.ReaderFrom).ReadFrom(io.LimitReader(c, resp.ContentLength-int64(len(head))))
	})
}

type floorBuffers struct{}

func (floorBuffers) Get() []byte  { return make([]byte, 256<<10) }
func (floorBuffers) Put(_ []byte) {}

// floorDownload GETs the 1 GiB file from addr as the workspace benchmark's client does.
func floorDownload(tb testing.TB, addr string) time.Duration {
	start := time.Now()
	resp, err := (&http.Client{Transport: &http.Transport{}}).Get("http://" + addr + "/file")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{resp.Body}, make([]byte, 1<<20))
	if err != nil || n != 1<<30 {
		tb.Fatalf("download from %s: %d bytes, %v", addr, n, err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
