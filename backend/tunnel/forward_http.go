package tunnel

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/fault"
)

// Forwarding: the replica that opens a stream (the opener) and the one holding the agent's
// session (the holder) are different. The opener sends
//
//	GET /internal/v1/tunnel/forward?agent=<id>   Connection: Upgrade, Upgrade: nimbus-tunnel-forward
//	Authorization: Nimbus-Replica <unix time>.<nonce>.<hex HMAC-SHA256>
//
// to the holder's internal URL. The holder checks the signature, the time (within maxSkew of
// its own clock) and that the nonce is new (kept in Redis for twice maxSkew), opens a raw
// stream on the agent's session, answers 101 and copies bytes both ways until both ends have
// closed. The header and the agent's reply travel inside, untouched: the opener does the
// handshake as it would on a session of its own. The holder never forwards again.

// PathForward is the holder's forwarding endpoint. It is not under /api/v1: it is for replicas
// only, and the signature is its only authentication.
const PathForward = "/internal/v1/tunnel/forward"

const (
	forwardProtocol = "nimbus-tunnel-forward"
	authScheme      = "Nimbus-Replica"
	maxSkew         = 30 * time.Second
)

// deriveKey makes the forwarding key from the shared secret, so the secret itself (which
// encrypts data at rest) never signs anything.
func deriveKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nimbus tunnel forwarding v1"))
	return m.Sum(nil)
}

// signature is the HMAC of one forwarding request.
func signature(key []byte, agentID, ts, nonce string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "GET\n%s\n%s\n%s\n%s", PathForward, agentID, ts, nonce)
	return hex.EncodeToString(m.Sum(nil))
}

func (h *Hub) authorization(agentID string, now time.Time) string {
	ts, nonce := strconv.FormatInt(now.Unix(), 10), randomID()
	return authScheme + " " + ts + "." + nonce + "." + signature(h.key, agentID, ts, nonce)
}

// verify checks a forwarding request's Authorization header.
func (h *Hub) verify(ctx context.Context, header, agentID string, now time.Time) error {
	if h.key == nil {
		return errors.New("this replica has no secret to check replicas with")
	}
	scheme, cred, _ := strings.Cut(header, " ")
	parts := strings.Split(cred, ".")
	if scheme != authScheme || len(parts) != 3 {
		return errors.New("no replica signature")
	}
	ts, nonce, sig := parts[0], parts[1], parts[2]
	if !hmac.Equal([]byte(sig), []byte(signature(h.key, agentID, ts, nonce))) {
		return errors.New("bad replica signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > maxSkew {
		return errors.New("replica signature out of date (are the replicas' clocks apart?)")
	}
	if h.cfg.Redis == nil {
		return errors.New("no Redis to keep the nonces of replica signatures in")
	}
	fresh, err := h.cfg.Redis.SetNX(ctx, "nimbus:tunnel:nonce:"+nonce, 1, 2*maxSkew).Result()
	if err != nil {
		return fmt.Errorf("check the nonce: %w", err)
	}
	if !fresh {
		return errors.New("replayed replica signature")
	}
	return nil
}

// checkInternalURL accepts http(s)://host:port with no path.
func checkInternalURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return fmt.Errorf("tunnel: invalid internal URL %q: want http(s)://host[:port]", s)
	}
	return nil
}

// forward opens a raw stream to the agent through the replica that holds its session.
func (h *Hub) forward(ctx context.Context, agentID string, rec record) (net.Conn, error) {
	if rec.URL == "" {
		return nil, fmt.Errorf("%w: agent %s is connected to a replica with no internal URL (set NIMBUS_INTERNAL_URL)", ErrNoTunnel, agentID)
	}
	if h.key == nil {
		return nil, fmt.Errorf("%w: agent %s is connected to another replica, and this one has no secret to sign with", ErrNoTunnel, agentID)
	}
	if h.ownURL() == rec.URL {
		// An earlier process of this replica (the agent has not reconnected yet), or replicas
		// that share one internal URL: forwarding would only come back here.
		return nil, fmt.Errorf("%w: agent %s is recorded at this replica's own address %s by another process "+
			"(a restart, or replicas sharing NIMBUS_INTERNAL_URL)", ErrNoTunnel, agentID, rec.URL)
	}
	u, err := url.Parse(strings.TrimRight(rec.URL, "/") + PathForward + "?agent=" + url.QueryEscape(agentID))
	if err != nil {
		return nil, fmt.Errorf("tunnel: agent %s's record has a bad URL %q: %w", agentID, rec.URL, err)
	}
	conn, err := dialReplica(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%w: agent %s: its replica %s: %w", ErrNoTunnel, agentID, rec.URL, err)
	}
	br, err := h.upgrade(ctx, conn, u, agentID)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// dialReplica connects to the replica of u, with TLS for https.
func dialReplica(ctx context.Context, u *url.URL) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	var d net.Dialer
	if u.Scheme == "https" {
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}
		return td.DialContext(ctx, "tcp", host)
	}
	return d.DialContext(ctx, "tcp", host)
}

// upgrade sends the forwarding request on conn and reads the holder's 101.
func (h *Hub) upgrade(ctx context.Context, conn net.Conn, u *url.URL, agentID string) (*bufio.Reader, error) {
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{
		"Connection":    {"Upgrade"},
		"Upgrade":       {forwardProtocol},
		"Authorization": {h.authorization(agentID, time.Now())},
	}}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("%w: agent %s: forward to %s: %w", ErrNoTunnel, agentID, u.Host, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("%w: agent %s: forward to %s: %w", ErrNoTunnel, agentID, u.Host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		err := fmt.Errorf("tunnel: agent %s: forward to %s: %d %s", agentID, u.Host, resp.StatusCode, strings.TrimSpace(string(b)))
		if resp.StatusCode == http.StatusNotFound {
			// The record was stale: the agent left that replica.
			err = fmt.Errorf("%w: %w", ErrNoTunnel, err)
		}
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("tunnel: agent %s: forward: %w", agentID, ctx.Err())
	}
	conn.SetDeadline(time.Time{})
	return br, nil
}

// serveForward is the holder's end of a forwarded stream.
func (h *Hub) serveForward(c *gin.Context) error {
	agentID := c.Query("agent")
	if err := h.verify(c.Request.Context(), c.GetHeader("Authorization"), agentID, time.Now()); err != nil {
		return fault.Unauthenticated("replicas only: %v", err)
	}
	if !hasToken(c.Request.Header, "Connection", "upgrade") || !hasToken(c.Request.Header, "Upgrade", forwardProtocol) {
		return fault.BadRequest("a forwarded stream is an upgrade to %s", forwardProtocol)
	}
	if !h.enter() {
		return fault.Unavailable("this replica is shutting down")
	}
	defer h.active.Done()
	st, err := h.localStream(c.Request.Context(), agentID)
	if err != nil {
		return fault.NotFound("agent %s has no tunnel on this replica", agentID)
	}
	c.Writer.WriteHeader(http.StatusSwitchingProtocols) // for the access log; the 101 is written below
	conn, rw, err := c.Writer.Hijack()
	if err != nil {
		st.Close()
		return fmt.Errorf("tunnel: hijack a forwarded stream: %w", err)
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+forwardProtocol+"\r\n\r\n"); err != nil {
		conn.Close()
		st.Close()
		return nil
	}
	splice(&bufferedConn{Conn: conn, r: rw.Reader}, st)
	return nil
}

// splice copies a↔b until both directions end. An end that closes its writing half is passed
// on as a half-close (so "send everything, then read the answer" works through a forward); an
// error in either direction closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(buf)
		if _, err := io.CopyBuffer(dst, src, *buf); err != nil {
			a.Close()
			b.Close()
		} else {
			closeWrite(dst)
		}
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}

// copyBuffers are splice's buffers. io.Copy's 32 KiB would cut a bulk stream into 32 KiB yamux
// frames (and WebSocket messages); 256 KiB makes one frame of each read of a fast sender.
var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 256<<10)
	return &b
}}

// closeWrite half-closes c: a TCP connection's writing half, or a tunnel stream (its CloseWrite;
// its Close is a half-close too).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// bufferedConn is a connection whose first bytes were read ahead into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite half-closes the connection underneath when it can (TCP, TLS).
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Conn.Close()
}
