package workspace

import (
	"context"
	"net"
	"sync"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// sshKeys holds one host key per workspace lease, so an SSH client that reconnects to the same
// workspace sees the same key.
type sshKeys struct {
	mu   sync.Mutex
	keys map[string]any
}

// sshStream serves an SSH connection to the workspace (nimbus workspace ssh).
func (s *Server) sshStream(ctx context.Context, h protocol.TunnelHeader, conn net.Conn) {
	_, release, ok := s.attach(h, conn)
	if !ok {
		return
	}
	defer release()
	<-ctx.Done()
}
