// Package workspace serves the streams the server opens to a workspace over the agent's tunnel
// (agent/tunnel): a terminal, a forwarded port, an SSH connection, a status query and a restore
// of saved work. Each stream names the workspace by its lease; the runner (agent/runner) says
// which container that is and counts the stream as a connection for idle recycling while it is
// open. The server's end is backend/workspace, whose README describes what users see.
package workspace

import (
	"context"
	"io"
	"net"

	"github.com/nimbus-build/nimbus/agent/executor"
)

// Process is a process running in a workspace (*executor.ExecSession): its stdin and output
// (one stream with a TTY), its terminal size and its exit.
type Process interface {
	io.ReadWriteCloser
	CloseWrite() error
	Resize(rows, cols uint) error
	Wait(ctx context.Context) (int, error)
}

// Target is the container a stream goes into.
type Target interface {
	Exec(ctx context.Context, spec executor.ExecSpec) (Process, error)
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// ContainerTarget makes a started container (executor.StartContainer) a Target.
func ContainerTarget(c *executor.Container) Target { return containerTarget{c} }

type containerTarget struct{ c *executor.Container }

func (t containerTarget) Exec(ctx context.Context, spec executor.ExecSpec) (Process, error) {
	s, err := t.c.Exec(ctx, spec)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (t containerTarget) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return t.c.DialPort(ctx, port)
}
