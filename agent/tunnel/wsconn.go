package tunnel

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gorilla/websocket"
)

// WebSocketConn is ws as the byte stream yamux runs on, for both ends of the tunnel: every
// Write is one binary message, and Read returns the bytes of the messages in order. Close
// drops the connection at once (no close handshake: the usual reason to close is a peer that
// is gone). It is safe for one reader and one writer at a time, which is how yamux uses it.
func WebSocketConn(ws *websocket.Conn) net.Conn { return &wsConn{ws: ws} }

type wsConn struct {
	ws *websocket.Conn
	r  io.Reader // the message being read; nil between messages
}

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, readError(err)
			}
			if typ != websocket.BinaryMessage {
				return 0, errors.New("tunnel: a text message on the tunnel")
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil // the message ended; the stream goes on with the next one
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// readError turns a peer's normal close into the end of the stream.
func readError(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		return io.EOF
	}
	return err
}

func (c *wsConn) Write(p []byte) (int, error) {
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConn) Close() error                       { return c.ws.Close() }
func (c *wsConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }

func (c *wsConn) SetDeadline(t time.Time) error {
	return errors.Join(c.ws.SetReadDeadline(t), c.ws.SetWriteDeadline(t))
}
