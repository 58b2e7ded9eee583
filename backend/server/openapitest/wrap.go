package openapitest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// Handler wraps next so that every response it writes is checked against the document after
// the handler returns; report receives each mismatch. The response still goes to the client as
// it is written (streams keep streaming); a hijacked connection (a WebSocket) is not checked.
func (v *Validator) Handler(next http.Handler, report func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handler may read and replace r; keep what the check needs.
		req := r.Clone(r.Context())
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.hijacked {
			return
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if err := v.Check(req, status, w.Header(), rec.body.Bytes()); err != nil {
			report(err)
		}
	})
}

// recorder passes a response through while keeping a copy of its status and body.
type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Flush keeps server-sent events and log tails streaming through the wrapper.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack lets WebSocket upgrades through; the exchange is then no longer an HTTP response.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("openapitest: the underlying ResponseWriter cannot hijack")
	}
	r.hijacked = true
	return h.Hijack()
}

// Unwrap serves http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Transport wraps next (nil: http.DefaultTransport) so that every response a client receives is
// checked against the document; report receives each mismatch. The body is read whole before
// the response is returned, so a Transport is for clients of finite responses, not for streams
// (a text/event-stream response is passed through unread and only its status is checked).
func (v *Validator) Transport(next http.RoundTripper, report func(error)) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		res, err := next.RoundTrip(req)
		if err != nil {
			return res, err
		}
		var body []byte
		if res.Header.Get("Content-Type") != "text/event-stream" {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
			res.Body = io.NopCloser(bytes.NewReader(body))
			if err != nil {
				return res, fmt.Errorf("openapitest: read response body: %w", err)
			}
		}
		if err := v.Check(req, res.StatusCode, res.Header, body); err != nil {
			report(err)
		}
		return res, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
