// Package tunnelwire is what both ends of the agent tunnel put on the wire (the stream protocol
// itself is internal/protocol/tunnel.go): the WebSocket connection as a byte stream for yamux,
// yamux's configuration, and the half-closing stream both ends hand out. The agent's end is
// agent/tunnel, the server's backend/tunnel; each imports this and neither imports the other.
package tunnelwire

import (
	"log/slog"
	"strings"
	"time"

	yamux "github.com/libp2p/go-yamux/v5"
)

// Flow control of the tunnel's streams (libp2p/go-yamux). A stream's window starts at yamux's
// 256 KiB and doubles, up to StreamWindow, each time its reader takes a whole window within
// four round trips of the connection (measured by a ping when it starts and every
// rttInterval). The cap is a trade: what is in flight on a short path (a LAN, loopback) stays
// in the CPU's caches below about 1 MiB (on loopback 2 MiB cost a quarter of the throughput and
// 4 MiB or more a third to a half), while one stream over a long path moves at most
// StreamWindow per round trip (1 MiB: 50 MiB/s at 20 ms, 20 MiB/s at 50 ms).
const (
	StreamWindow = 1 << 20
	// MaxFrame bounds a yamux frame (header included): a 256 KiB write goes out as one frame,
	// and one WebSocket message, while a bulk stream holds the connection for at most that much
	// before a keystroke on another stream gets its turn.
	MaxFrame = 256<<10 + 12
	// rttInterval is how often the round trip is measured again.
	rttInterval = 10 * time.Second
)

// MuxConfig is the yamux configuration of both ends of the tunnel: pings every keepalive (when
// nothing was received in between), and a connection whose ping or write is not through within
// timeout is dropped.
func MuxConfig(keepalive, timeout time.Duration, log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = true
	c.KeepAliveInterval = keepalive
	c.ConnectionWriteTimeout = timeout
	c.MaxStreamWindowSize = StreamWindow
	c.MaxMessageSize = MaxFrame
	c.MeasureRTTInterval = rttInterval
	c.LogOutput = muxLogger{log}
	return c
}

// muxLogger sends yamux's log lines (a failed keepalive, a write to a dead connection) to the
// debug level: what matters of them reaches the caller as the session's end.
type muxLogger struct{ log *slog.Logger }

func (l muxLogger) Write(p []byte) (int, error) {
	l.log.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
