package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A terminal is a shell on a PTY in the workspace. It outlives the stream that started it: a
// broken connection detaches it, and a stream naming its session within Linger attaches
// again, replaying the tail of its output first. Only an attached terminal counts as a
// connection for idle recycling.
type terminal struct {
	id, lease string
	proc      Process

	mu      sync.Mutex
	out     net.Conn // the attached stream, nil while detached
	release func()   // the attached stream's connection count
	tail    []byte   // the last Scrollback bytes of output
	linger  *time.Timer
	exited  bool
}

// loginShell runs bash when the image has it, else sh, as a login shell.
var loginShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}

// termWriteTimeout bounds writing output to a stream: a stuck browser detaches rather than
// stopping the shell for everyone.
const termWriteTimeout = 10 * time.Second

func (s *Server) terminal(ctx context.Context, h protocol.TunnelHeader, conn net.Conn) {
	target, release, ok := s.attach(h, conn)
	if !ok {
		return
	}
	t, err := s.terminalFor(h, target)
	if err != nil {
		protocol.WriteTermJSON(conn, protocol.TermExit, protocol.TermExitInfo{Code: -1})
		release()
		return
	}
	if !t.attachStream(conn, release, s.cfg.Linger, func() { s.dropTerminal(t) }) {
		return
	}
	// Keystrokes and resizes until the stream ends.
read:
	for {
		typ, b, err := protocol.ReadTermFrame(conn)
		if err != nil {
			break
		}
		switch typ {
		case protocol.TermData:
			if _, err := t.proc.Write(b); err != nil {
				break read
			}
		case protocol.TermResize:
			var sz protocol.TermSize
			if json.Unmarshal(b, &sz) == nil && sz.Cols > 0 && sz.Rows > 0 {
				t.proc.Resize(sz.Rows, sz.Cols)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	t.detach(conn, s.cfg.Linger, func() { s.dropTerminal(t) })
}

// terminalFor is the header's session when it lives, else a new shell.
func (s *Server) terminalFor(h protocol.TunnelHeader, target Target) (*terminal, error) {
	if id := h.Fields["session"]; id != "" {
		s.mu.Lock()
		t := s.terminals[id]
		s.mu.Unlock()
		if t != nil && t.lease == h.Fields["lease"] {
			return t, nil
		}
	}
	rows, _ := strconv.Atoi(h.Fields["rows"])
	cols, _ := strconv.Atoi(h.Fields["cols"])
	if rows <= 0 || cols <= 0 {
		rows, cols = 24, 80
	}
	proc, err := target.Exec(s.ctx, executor.ExecSpec{Cmd: loginShell, TTY: true, Rows: uint(rows), Cols: uint(cols),
		Env: map[string]string{"TERM": "xterm-256color", "COLORTERM": "truecolor"}})
	if err != nil {
		s.cfg.Log.Warn("workspace: starting a shell failed", "lease_id", h.Fields["lease"], "err", err)
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	t := &terminal{id: "t-" + hex.EncodeToString(b[:]), lease: h.Fields["lease"], proc: proc}
	s.mu.Lock()
	s.terminals[t.id] = t
	s.mu.Unlock()
	go s.pump(t)
	return t, nil
}

func (s *Server) dropTerminal(t *terminal) {
	s.mu.Lock()
	if s.terminals[t.id] == t {
		delete(s.terminals, t.id)
	}
	s.mu.Unlock()
	t.proc.Close()
}

// pump copies the shell's output to the attached stream and the tail until the shell ends,
// then tells the stream its exit code and closes it.
func (s *Server) pump(t *terminal) {
	buf := make([]byte, 32<<10)
	for {
		n, err := t.proc.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.tail = append(t.tail, buf[:n]...)
			if over := len(t.tail) - s.cfg.Scrollback; over > 0 {
				t.tail = append(t.tail[:0], t.tail[over:]...)
			}
			if t.out != nil {
				t.out.SetWriteDeadline(time.Now().Add(termWriteTimeout))
				if protocol.WriteTermFrame(t.out, protocol.TermData, buf[:n]) != nil {
					t.out.Close() // its reader ends and detaches
				}
			}
			t.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	wctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	code, err := t.proc.Wait(wctx)
	cancel()
	if err != nil {
		code = -1
	}
	t.mu.Lock()
	t.exited = true
	if t.out != nil {
		t.out.SetWriteDeadline(time.Now().Add(termWriteTimeout))
		protocol.WriteTermJSON(t.out, protocol.TermExit, protocol.TermExitInfo{Code: code})
		t.out.Close()
	}
	if t.linger != nil {
		t.linger.Stop()
	}
	t.mu.Unlock()
	s.dropTerminal(t)
}

// attachStream makes conn the terminal's stream: the session line, the tail, then live output.
// A stream attached before is closed: one browser tab holds a shell at a time.
func (t *terminal) attachStream(conn net.Conn, release func(), linger time.Duration, drop func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		release()
		protocol.WriteTermJSON(conn, protocol.TermExit, protocol.TermExitInfo{Code: -1})
		return false
	}
	if t.linger != nil {
		t.linger.Stop()
		t.linger = nil
	}
	if t.out != nil {
		t.out.Close()
		t.release()
	}
	conn.SetWriteDeadline(time.Now().Add(termWriteTimeout))
	if protocol.WriteTermJSON(conn, protocol.TermSession, protocol.TermSessionInfo{ID: t.id}) != nil ||
		(len(t.tail) > 0 && protocol.WriteTermFrame(conn, protocol.TermData, t.tail) != nil) {
		t.out, t.release = nil, nil
		release()
		t.linger = time.AfterFunc(linger, drop)
		return false
	}
	t.out, t.release = conn, release
	return true
}

// detach lets go of conn, if it is still the attached stream, and gives the shell Linger to be
// attached again.
func (t *terminal) detach(conn net.Conn, linger time.Duration, drop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out != conn {
		return
	}
	t.out = nil
	t.release()
	t.release = nil
	if !t.exited {
		t.linger = time.AfterFunc(linger, drop)
	}
}
