package client

import (
	"context"
	"fmt"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// Renew extends a lease. RenewResponse.Cancel tells the agent to stop the pipeline. A lease the
// server no longer honours fails with ErrLeaseLost.
func (c *Client) Renew(ctx context.Context, leaseID string) (protocol.RenewResponse, error) {
	var resp protocol.RenewResponse
	path, err := leasePath(leaseID, "renew")
	if err != nil {
		return resp, err
	}
	if _, err := c.postJSON(ctx, path, protocol.RenewRequest{}, &resp); err != nil {
		return resp, fmt.Errorf("renew: %w", err)
	}
	return resp, nil
}

// Event reports one step of a running pipeline. The server treats it idempotently per (job,
// kind), so a retry after a lost answer is harmless.
func (c *Client) Event(ctx context.Context, leaseID string, ev protocol.Event) error {
	path, err := leasePath(leaseID, "events")
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, ev, nil); err != nil {
		return fmt.Errorf("event %s: %w", ev.Kind, err)
	}
	return nil
}

// Finish reports the pipeline's final status (success, failed or cancelled). It is idempotent.
func (c *Client) Finish(ctx context.Context, leaseID string, req protocol.FinishRequest) error {
	path, err := leasePath(leaseID, "finish")
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, req, nil); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}
