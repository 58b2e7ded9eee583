package workspace

import (
	"context"
	"net"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// sshKeys holds one host key per workspace lease, so an SSH client that reconnects to the same
// workspace sees the same key. Keys live in memory only: a new workspace (a new lease) gets a
// new key, and the agent forgets them when it stops.
type sshKeys struct {
	mu   sync.Mutex
	keys map[string]ssh.Signer
}

func (k *sshKeys) of(lease string) (ssh.Signer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.keys[lease]; ok {
		return s, nil
	}
	s, err := NewHostKey()
	if err != nil {
		return nil, err
	}
	if k.keys == nil || len(k.keys) > 1000 {
		k.keys = map[string]ssh.Signer{}
	}
	k.keys[lease] = s
	return s, nil
}

// sshStream serves an SSH connection to the workspace (nimbus workspace ssh); it counts as a
// connection for idle recycling while it is open.
func (s *Server) sshStream(ctx context.Context, h protocol.TunnelHeader, conn net.Conn) {
	key, err := s.ssh.of(h.Fields["lease"])
	if err != nil {
		refuse(conn, protocol.TunnelNoWorkspace, "no SSH host key: "+err.Error())
		return
	}
	target, release, ok := s.attach(h, conn)
	if !ok {
		return
	}
	defer release()
	if err := ServeSSH(ctx, target, conn, SSHConfig{HostKey: key, User: "root",
		Env: map[string]string{"TERM": "xterm-256color"}, Log: s.cfg.Log}); err != nil && ctx.Err() == nil {
		s.cfg.Log.Info("workspace: SSH connection ended", "lease_id", h.Fields["lease"], "err", err)
	}
}
