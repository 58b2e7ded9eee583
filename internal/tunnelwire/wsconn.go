package tunnelwire

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/gorilla/websocket"
)

// WebSocketConn is ws as the byte stream yamux runs on, for both ends of the tunnel (client is
// the agent's end, which masks what it sends, RFC 6455 §5.3). Every Write is one binary message
// (go-yamux writes a whole frame, header and body, in one call), and Read returns the bytes of
// the messages in order, wherever they are cut. Close drops the connection at once (no close
// handshake: the usual reason to close is a peer that is gone). It is safe for one reader and
// one writer at a time, which is how yamux uses it.
//
// Messages are written here, straight to the connection under ws, not by ws: the server's end
// sends a message's header and payload in one writev without copying the payload, the agent's
// end masks the payload while copying it into one buffer (gorilla copies, then masks in a second
// pass). ws only reads; the control frames its reading answers (a pong to a ping, the reply to a
// close) are written here too, so two writers never interleave on the connection. (A frame ws
// cannot parse makes it write a close frame itself: the connection ends there anyway.)
func WebSocketConn(ws *websocket.Conn, client bool) net.Conn {
	c := &wsConn{ws: ws, nc: ws.NetConn(), client: client, wlock: make(chan struct{}, 1)}
	_, c.writev = c.nc.(*net.TCPConn)
	ws.SetPingHandler(c.answerPing)
	ws.SetCloseHandler(c.answerClose)
	return c
}

type wsConn struct {
	ws     *websocket.Conn
	nc     net.Conn
	client bool
	writev bool // nc writes several buffers with one system call
	r      io.Reader

	// wlock serializes frames (a channel, so that a control reply can give up waiting).
	wlock chan struct{}
	werr  error     // a failed write leaves a frame cut short: every later write fails
	bufs  [2][]byte // the server's writev
	wbuf  []byte    // the agent's masked frames; the server's frames to a conn without writev
	hdr   [maxFrameHeader]byte
}

const (
	maxFrameHeader = 14 // WebSocket: 2, 8 bytes of extended length, 4 of mask key
	// frameBuffer is the agent's buffer for masked frames: a whole yamux frame (MaxFrame) goes
	// out in one write, a larger message in writes of this size.
	frameBuffer = MaxFrame + maxFrameHeader
	// unbufferedFrame is how much of a server's message is copied into one write when the
	// connection has no writev (TLS): enough for the header not to travel alone.
	unbufferedFrame = 16 << 10
	// controlWait bounds how long a control reply waits for the frame being written.
	controlWait = time.Second
)

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
	c.wlock <- struct{}{}
	defer func() { <-c.wlock }()
	if c.werr != nil {
		return 0, c.werr
	}
	if err := c.writeFrame(websocket.BinaryMessage, p); err != nil {
		c.werr = err
		return 0, err
	}
	return len(p), nil
}

// frameHeader encodes the header of a final frame of op with a payload of n bytes (and the mask
// key, for the agent) into c.hdr.
func (c *wsConn) frameHeader(op int, n int, key uint32) []byte {
	h := c.hdr[:0]
	h = append(h, 0x80|byte(op))
	var mask byte
	if c.client {
		mask = 0x80
	}
	switch {
	case n <= 125:
		h = append(h, mask|byte(n))
	case n <= 0xffff:
		h = append(h, mask|126)
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h = append(h, mask|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	if c.client {
		h = binary.LittleEndian.AppendUint32(h, key)
	}
	return h
}

// writeFrame writes one final frame of op with payload p; wlock is held.
func (c *wsConn) writeFrame(op int, p []byte) error {
	if c.client {
		key := rand.Uint32()
		if key == 0 {
			key = 1 // a key of zero would leave the payload as it is
		}
		return c.writeMasked(c.frameHeader(op, len(p), key), key, p)
	}
	h := c.frameHeader(op, len(p), 0)
	if c.writev {
		c.bufs = [2][]byte{h, p}
		bufs := net.Buffers(c.bufs[:])
		_, err := bufs.WriteTo(c.nc)
		c.bufs = [2][]byte{}
		return err
	}
	// One write for the header and the start of the payload, then the rest as it is.
	if c.wbuf == nil {
		c.wbuf = make([]byte, 0, maxFrameHeader+unbufferedFrame)
	}
	k := min(len(p), cap(c.wbuf)-len(h))
	if _, err := c.nc.Write(append(append(c.wbuf[:0], h...), p[:k]...)); err != nil {
		return err
	}
	if k < len(p) {
		_, err := c.nc.Write(p[k:])
		return err
	}
	return nil
}

// writeMasked writes the agent's frame: the header h, then p masked with key, through c.wbuf.
func (c *wsConn) writeMasked(h []byte, key uint32, p []byte) error {
	if c.wbuf == nil {
		c.wbuf = make([]byte, 0, frameBuffer)
	}
	w := append(c.wbuf[:0], h...)
	for pos := 0; ; {
		k := min(len(p), cap(w)-len(w))
		maskCopy(w[len(w):len(w)+k], p[:k], key, pos)
		w, p, pos = w[:len(w)+k], p[k:], pos+k
		if _, err := c.nc.Write(w); err != nil || len(p) == 0 {
			return err
		}
		w = w[:0]
	}
}

// maskCopy copies src into dst (as long) masked with key, whose first byte masks the payload's
// byte 0; src is the payload from its byte pos on. Eight bytes at a time: about half the speed
// of a plain copy.
func maskCopy(dst, src []byte, key uint32, pos int) {
	key = key>>(8*(pos%4)) | key<<(32-8*(pos%4))
	k := uint64(key) | uint64(key)<<32
	dst = dst[:len(src)]
	for len(src) >= 64 {
		s, d := src[:64], dst[:64]
		binary.LittleEndian.PutUint64(d[0:8], binary.LittleEndian.Uint64(s[0:8])^k)
		binary.LittleEndian.PutUint64(d[8:16], binary.LittleEndian.Uint64(s[8:16])^k)
		binary.LittleEndian.PutUint64(d[16:24], binary.LittleEndian.Uint64(s[16:24])^k)
		binary.LittleEndian.PutUint64(d[24:32], binary.LittleEndian.Uint64(s[24:32])^k)
		binary.LittleEndian.PutUint64(d[32:40], binary.LittleEndian.Uint64(s[32:40])^k)
		binary.LittleEndian.PutUint64(d[40:48], binary.LittleEndian.Uint64(s[40:48])^k)
		binary.LittleEndian.PutUint64(d[48:56], binary.LittleEndian.Uint64(s[48:56])^k)
		binary.LittleEndian.PutUint64(d[56:64], binary.LittleEndian.Uint64(s[56:64])^k)
		src, dst = src[64:], dst[64:]
	}
	for len(src) >= 8 {
		binary.LittleEndian.PutUint64(dst[:8], binary.LittleEndian.Uint64(src[:8])^k)
		src, dst = src[8:], dst[8:]
	}
	for i := range src {
		dst[i] = src[i] ^ byte(k>>(8*(i%4)))
	}
}

// writeControl writes a control frame unless the frame being written holds the connection for
// longer than controlWait.
func (c *wsConn) writeControl(op int, payload []byte) error {
	t := time.NewTimer(controlWait)
	defer t.Stop()
	select {
	case c.wlock <- struct{}{}:
	case <-t.C:
		return errControlTimeout
	}
	defer func() { <-c.wlock }()
	if c.werr != nil {
		return c.werr
	}
	payload = payload[:min(len(payload), 125)]
	err := c.writeFrame(op, payload)
	if err != nil {
		c.werr = err
	}
	return err
}

var errControlTimeout = errors.New("tunnel: a control frame waited too long for the connection")

// answerPing answers a WebSocket ping (the tunnel's own pings are yamux's; an intermediary may
// send these) with its pong, as gorilla's default handler does.
func (c *wsConn) answerPing(data string) error {
	if err := c.writeControl(websocket.PongMessage, []byte(data)); err != nil && !errors.Is(err, errControlTimeout) {
		return err
	}
	return nil
}

// answerClose echoes the peer's close code, as gorilla's default handler does; the read then
// ends with the close.
func (c *wsConn) answerClose(code int, _ string) error {
	var msg []byte
	if code != websocket.CloseNoStatusReceived {
		msg = websocket.FormatCloseMessage(code, "")
	}
	c.writeControl(websocket.CloseMessage, msg)
	return nil
}

func (c *wsConn) Close() error                       { return c.ws.Close() }
func (c *wsConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }

func (c *wsConn) SetDeadline(t time.Time) error {
	return errors.Join(c.ws.SetReadDeadline(t), c.nc.SetWriteDeadline(t))
}
