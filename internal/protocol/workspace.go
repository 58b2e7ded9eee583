package protocol

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Workspace streams: what the server opens on the agent's tunnel (tunnel.go) to reach a cloud
// workspace. Every header names the workspace by its lease (field "lease"). After the tunnel's
// accept, the agent writes one more TunnelReply line for the workspace itself: accepted, or
// refused with TunnelNoWorkspace (the lease is not a ready workspace of this agent) or
// TunnelBadHeader; then the kind's bytes follow.
//
//	kind                  fields                     after the accept
//	workspace.terminal    session, cols, rows        terminal frames both ways (below)
//	workspace.port        port                       the raw bytes of a TCP connection to that
//	                                                 port inside the workspace
//	workspace.ssh         —                          an SSH connection to the agent's SSH server
//	                                                 of that workspace
//	workspace.status      —                          one WorkspaceStatus JSON line, then EOF
//	workspace.keepalive   —                          one WorkspaceStatus JSON line, then EOF
//	workspace.restore     ref                        one WorkspaceRestore JSON line, then EOF
const (
	KindWorkspaceTerminal  = "workspace.terminal"
	KindWorkspacePort      = "workspace.port"
	KindWorkspaceSSH       = "workspace.ssh"
	KindWorkspaceStatus    = "workspace.status"
	KindWorkspaceKeepAlive = "workspace.keepalive"
	KindWorkspaceRestore   = "workspace.restore"
)

// Workspace refusal codes: the lease is not a ready workspace of this agent; nothing listens
// on the port asked for.
const (
	TunnelNoWorkspace = "no_workspace"
	TunnelPortClosed  = "port_closed"
)

// IDE kinds of WorkspaceStatus.IDE.
const (
	IDECodeServer = "code-server" // the image's own code-server, started on IDEPort
	IDESidecar    = "sidecar"     // the operator's IDE container beside the workspace's
	IDELaunch     = "launch"      // the vscode service's launch command (onlyPreview)
	IDENone       = "none"        // no IDE: the terminal is the way in
)

// IDEPort is the port the IDE (or a launch command) listens on inside the workspace, as on CNB.
const IDEPort = 8686

// WorkspaceStatus is what the agent knows of a running workspace.
type WorkspaceStatus struct {
	Connections int `json:"connections"`
	// IdleForMs is how long nothing has been connected (0 while something is); the workspace
	// is recycled when it reaches IdleTimeoutMs.
	IdleForMs     int64     `json:"idleForMs"`
	IdleTimeoutMs int64     `json:"idleTimeoutMs"`
	Deadline      time.Time `json:"deadline,omitzero"` // its lifetime cap
	IDE           string    `json:"ide"`
	IDEReason     string    `json:"ideReason,omitempty"`
}

// WorkspaceRestore answers workspace.restore: the files a saved work changed, now in the
// workspace's tree (uncommitted), or why it could not be applied.
type WorkspaceRestore struct {
	Files []string `json:"files,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Terminal frames: a type byte, a big-endian uint32 length, the payload. Data carries terminal
// bytes; the others carry JSON.
//
//	server → agent: TermData (keystrokes), TermResize {"cols","rows"}
//	agent → server: TermSession {"id"} first, TermData (output), TermExit {"code"} last
const (
	TermData    byte = 'd'
	TermResize  byte = 'r'
	TermSession byte = 's'
	TermExit    byte = 'x'
)

// MaxTermFrame bounds a frame's payload.
const MaxTermFrame = 1 << 20

// TermSize is a TermResize payload.
type TermSize struct {
	Cols uint `json:"cols"`
	Rows uint `json:"rows"`
}

// TermSessionInfo is a TermSession payload: the shell's id, to reattach with.
type TermSessionInfo struct {
	ID string `json:"id"`
}

// TermExitInfo is a TermExit payload.
type TermExitInfo struct {
	Code int `json:"code"`
}

// WriteTermFrame writes one frame in a single Write.
func WriteTermFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxTermFrame {
		return fmt.Errorf("terminal frame: %d bytes, at most %d", len(payload), MaxTermFrame)
	}
	b := make([]byte, 5+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("terminal frame: %w", err)
	}
	return nil
}

// WriteTermJSON writes a frame whose payload is v as JSON.
func WriteTermJSON(w io.Writer, typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("terminal frame: %w", err)
	}
	return WriteTermFrame(w, typ, b)
}

// ReadTermFrame reads one frame.
func ReadTermFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxTermFrame {
		return 0, nil, fmt.Errorf("terminal frame: %d bytes, at most %d", n, MaxTermFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, fmt.Errorf("terminal frame: %w", io.ErrUnexpectedEOF)
	}
	return h[0], b, nil
}
