package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// Poll long-polls for work that fits the free capacity in req. It returns nil and no error when
// no work came within the server's PollTimeout (204). The caller's context must allow longer
// than that timeout.
func (c *Client) Poll(ctx context.Context, req protocol.PollRequest) (*protocol.Lease, error) {
	var lease protocol.Lease
	status, err := c.postJSON(ctx, protocol.PathPoll, req, &lease)
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	return &lease, nil
}
