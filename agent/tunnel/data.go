package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// dataTimeout bounds making a data connection: the stream waits for it, and the tunnel is a
// fine fallback.
const dataTimeout = 5 * time.Second

// dialData makes the data connection a bulk stream's header offered (internal/protocol/tunnel.go):
// a TCP (or TLS) connection to the server upgraded to TunnelDataProtocol. It is not made
// through an HTTP proxy (the upgrade is not a WebSocket, which proxies may not pass): with a
// proxy for the server, the stream keeps its bytes.
func (c *Client) dialData(ctx context.Context, token string) (net.Conn, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + protocol.PathTunnelData
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: &u}); err != nil || p != nil {
		return nil, fmt.Errorf("data connection: the server is reached through a proxy")
	}
	ctx, cancel := context.WithTimeout(ctx, dataTimeout)
	defer cancel()
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	dial := c.cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("data connection: %w", err)
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.cfg.TLS != nil {
			cfg = c.cfg.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("data connection: TLS: %w", err)
		}
		conn = tc
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	br, err := c.upgradeData(conn, &u, token)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("data connection: %w", err)
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// Never in practice: the server writes nothing before the agent's answer.
		return &prefixConn{Conn: conn, r: io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)}, nil
	}
	return conn, nil
}

// upgradeData sends the upgrade request and reads the 101.
func (c *Client) upgradeData(conn net.Conn, u *url.URL, token string) (*bufio.Reader, error) {
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{
		"Connection":              {"Upgrade"},
		"Upgrade":                 {protocol.TunnelDataProtocol},
		"Authorization":           {"Bearer " + c.cfg.Token()},
		"User-Agent":              {c.cfg.UserAgent},
		protocol.TunnelDataHeader: {token},
	}}
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, &StatusError{Status: resp.StatusCode, Message: responseMessage(resp)}
	}
	return br, nil
}

// prefixConn is a connection whose first bytes were read ahead.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return p.Conn.Close()
}
