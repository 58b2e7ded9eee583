package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/nimbus-build/nimbus/internal/protocol"
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

// Control holds the control long-poll: it returns as soon as the server wants one of the
// running leases in req stopped, or empty after the server's HeartbeatInterval. The caller's
// context must allow longer than that.
func (c *Client) Control(ctx context.Context, req protocol.ControlRequest) (protocol.ControlResponse, error) {
	var resp protocol.ControlResponse
	if _, err := c.postJSON(ctx, protocol.PathControl, req, &resp); err != nil {
		return resp, fmt.Errorf("control: %w", err)
	}
	return resp, nil
}

// Facts restates the agent's facts under its registration (protocol.PathFacts). It is sent
// once, without retries: a server that is away must not hold up the agent's start.
func (c *Client) Facts(ctx context.Context, req protocol.RegisterRequest) (protocol.FactsResponse, error) {
	var resp protocol.FactsResponse
	body, err := jsonBody(req)
	if err != nil {
		return resp, err
	}
	if _, err := c.once(ctx, request{method: http.MethodPost, path: protocol.PathFacts, body: body,
		contentType: "application/json", out: &resp}); err != nil {
		return resp, fmt.Errorf("facts: %w", err)
	}
	return resp, nil
}

// Deregister tells the server the agent is stopping, so it counts as offline at once. It is
// sent once, without retries: a stopping agent does not wait for a server that is away (it is
// then marked offline one lease TTL after it was last heard from).
func (c *Client) Deregister(ctx context.Context) error {
	if _, err := c.once(ctx, request{method: http.MethodPost, path: protocol.PathDeregister}); err != nil {
		return fmt.Errorf("deregister: %w", err)
	}
	return nil
}
