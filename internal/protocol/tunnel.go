package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// The agent tunnel: one multiplexed connection the agent opens to the server, so the server can
// reach an agent host that accepts no inbound connection (a browser's terminal or port forward
// into a workspace goes browser → server → this connection → agent). Server side:
// backend/tunnel (its README draws the flow); agent side: agent/tunnel.
//
//	GET /api/v1/agent/tunnel           Authorization: Bearer <agent token>
//	     Connection: Upgrade, Upgrade: websocket, Sec-WebSocket-Protocol: nimbus-tunnel.v1
//	     → 101, then binary WebSocket messages that carry a yamux session (the protocol of
//	       hashicorp/yamux; both ends run libp2p/go-yamux, which speaks it)
//	     → 401 with the error envelope for a missing or unknown token, 400 without the upgrade
//
// It is a plain HTTP(S) request upgraded to a WebSocket, so it passes the same load balancer as
// the rest of the API. The messages together are the session's byte stream: a reader must not
// rely on where they are cut, though each end sends one whole yamux frame per message (a frame
// carries at most 256 KiB of data). The agent masks its messages with a random key per message,
// as RFC 6455 requires of a client. The agent is the yamux client, the server the yamux server;
// only the server opens streams (an agent's stream is reset at once). A stream's receive window
// starts at 256 KiB and grows, up to 1 MiB, while its reader keeps up within a few round trips.
//
// Streams. The first thing the server writes on a stream is one TunnelHeader as a JSON line
// (at most MaxTunnelLine bytes, '\n' included); the agent answers one TunnelReply line: Accepted,
// or refused with a code (TunnelUnknownKind for a kind it has no handler for, TunnelBadHeader
// for a line it cannot read) and a message for people. After an accepted reply the stream is
// raw bytes both ways, owned by the kind's handler; either side closing its writing half is an
// EOF for the other (a yamux FIN). Close on either end's stream closes only its writing half.
//
// Data connections. A stream that may carry much (a preview's downloads) is better off on a TCP
// connection of its own: no framing, no masking, no window of the multiplexer, and on Linux the
// agent splices the bytes from socket to socket without reading them. When the server
// opens such a stream on a tunnel it holds, its header carries Data, a random single-use token.
// The agent may then, before it answers, connect to the same server URL:
//
//	GET /api/v1/agent/tunnel/data       Authorization: Bearer <agent token>
//	     Connection: Upgrade, Upgrade: nimbus-tunnel-data.v1, X-Nimbus-Tunnel-Data: <token>
//	     → 101, then the stream's raw bytes both ways
//	     → 404 when no stream of this agent waits for that token (it reached another replica,
//	       or the server gave up), 401 for an unknown agent token, 400 without the upgrade
//
// and answer Accepted with Data true: from then on the stream's bytes go on that connection, and
// the tunnel stream is closed. If the connection cannot be made (a balancer that passes
// WebSockets only, a proxy, another replica behind the balancer), the agent answers as always
// and the bytes go on the tunnel stream: slower, never wrong. A token is good for one
// connection, only for the agent the stream is for, and only while the server waits for the
// answer. Streams forwarded between replicas are never offered one.
//
// Liveness. Both ends send a yamux ping every TunnelKeepalive and drop the connection when a
// ping or a write is not through within TunnelTimeout, so a dead connection is noticed within
// seconds even when no stream is open (which also keeps idle-timeout proxies from cutting it).
// The agent then connects again with capped, jittered backoff (250 ms doubling to 10 s); a 4xx
// other than 429 waits the cap (after a 401 the poll loop registers again; a 404 is a server too
// old to have the tunnel).
//
// One connection per agent. A new connection of an agent replaces the one it had: the server
// that takes it records it as the agent's (below) and closes the agent's older connection, on
// itself at once, on another replica at that replica's next refresh of the record.
//
// Routing between server replicas. An agent's connection lands on one replica; a request for it
// may land on any. Each replica records, in Redis, which replica holds which agent's tunnel:
// key "nimbus:tunnel:agent:<agent id>" = {replica id, internal URL, session id}, written when
// the connection is accepted (before the 101, so the newest connection's record is the last
// written), refreshed every 10 s with a 30 s TTL (a crashed replica's records run out) and
// deleted, only while still its own, when the connection ends. The replica that opens a stream
// reads the record: its own → a stream on the local connection; another's → it forwards over an
// HTTP upgrade to that replica's internal URL (NIMBUS_INTERNAL_URL; by default the address the
// server listens on, enough for one replica), GET /internal/v1/tunnel/forward?agent=<id>,
// authenticated with an HMAC-SHA256 of the request under a key derived from NIMBUS_SECRET_KEY
// (which every replica shares), a timestamp within 30 s and a single-use nonce. The holder
// opens a stream on the agent's connection and copies bytes both ways; the header and the reply
// pass through unchanged, so the opening replica speaks the stream protocol above either way.
// No record (Redis lost it) falls back to a local connection when there is one. The holder
// never forwards again, so a stale record costs one failed hop, never a loop.

// PathTunnel is the agent's tunnel connection.
const PathTunnel = "/api/v1/agent/tunnel"

// PathTunnelData is where the agent makes a data connection (above).
const PathTunnelData = "/api/v1/agent/tunnel/data"

// Data connections: the upgrade's protocol name and the header that carries the token.
const (
	TunnelDataProtocol = "nimbus-tunnel-data.v1"
	TunnelDataHeader   = "X-Nimbus-Tunnel-Data"
)

// TunnelSubprotocol is the WebSocket subprotocol of the tunnel; a new one is a new major version.
const TunnelSubprotocol = "nimbus-tunnel.v1"

// Liveness of the tunnel connection (see above).
const (
	TunnelKeepalive = 3 * time.Second
	TunnelTimeout   = 5 * time.Second
)

// MaxTunnelLine bounds a header or reply line, its '\n' included.
const MaxTunnelLine = 64 << 10

// Refusal codes of TunnelReply.
const (
	TunnelUnknownKind = "unknown_kind"
	TunnelBadHeader   = "bad_header"
)

// TunnelHeader opens a stream: what the stream is for (Kind, e.g. "terminal") and that kind's
// parameters.
type TunnelHeader struct {
	Kind   string            `json:"kind"`
	Fields map[string]string `json:"fields,omitempty"`
	// Data offers a data connection for the stream's bytes: the token to make it with.
	Data string `json:"data,omitempty"`
}

// TunnelReply is the agent's answer to a TunnelHeader.
type TunnelReply struct {
	Accepted bool   `json:"accepted"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
	// Data: the agent made the data connection the header offered; the stream's bytes go there.
	Data bool `json:"data,omitempty"`
}

// WriteTunnelLine writes v as one JSON line.
func WriteTunnelLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("tunnel line: encode %T: %w", v, err)
	}
	b = append(b, '\n')
	if len(b) > MaxTunnelLine {
		return fmt.Errorf("tunnel line: %d bytes, at most %d", len(b), MaxTunnelLine)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("tunnel line: write: %w", err)
	}
	return nil
}

// ErrTunnelLineTooLong is a line without '\n' in its first MaxTunnelLine bytes.
var ErrTunnelLineTooLong = errors.New("tunnel line: too long")

// ReadTunnelLine reads one JSON line into v. It reads byte by byte, so nothing after the '\n'
// is consumed: the raw bytes that follow stay in r for the stream's owner.
func ReadTunnelLine(r io.Reader, v any) error {
	var line bytes.Buffer
	b := make([]byte, 1)
	for line.Len() < MaxTunnelLine {
		if _, err := io.ReadFull(r, b); err != nil {
			if errors.Is(err, io.EOF) && line.Len() > 0 {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("tunnel line: read: %w", err)
		}
		if b[0] == '\n' {
			if err := json.Unmarshal(line.Bytes(), v); err != nil {
				return fmt.Errorf("tunnel line: decode %T: %w", v, err)
			}
			return nil
		}
		line.WriteByte(b[0])
	}
	return ErrTunnelLineTooLong
}
