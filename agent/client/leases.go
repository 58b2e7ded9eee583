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

// Import reads a file of a repository of this install that a job of the lease imports
// (protocol.ImportRequest). A refusal by a secret repository's rule is an *APIError with code
// protocol.CodeImportRefused and the rule in its message.
func (c *Client) Import(ctx context.Context, leaseID string, req protocol.ImportRequest) (protocol.ImportFile, error) {
	var f protocol.ImportFile
	path, err := leasePath(leaseID, protocol.PathImportsSuffix)
	if err != nil {
		return f, err
	}
	if _, err := c.postJSON(ctx, path, req, &f); err != nil {
		return f, fmt.Errorf("import %s: %w", req.URL, err)
	}
	return f, nil
}

// Lock asks for a stage's or a job's lock (protocol/locks.go); a busy lock is Acquired false.
func (c *Client) Lock(ctx context.Context, leaseID string, req protocol.LockRequest) (protocol.LockResponse, error) {
	var out protocol.LockResponse
	path, err := leasePath(leaseID, protocol.PathLocksSuffix)
	if err != nil {
		return out, err
	}
	if _, err := c.postJSON(ctx, path, req, &out); err != nil {
		return out, fmt.Errorf("lock %q: %w", req.Key, err)
	}
	return out, nil
}

// Unlock releases a lock Lock took; releasing one not held is harmless.
func (c *Client) Unlock(ctx context.Context, leaseID string, req protocol.LockRequest) error {
	path, err := leasePath(leaseID, protocol.PathLocksReleaseSuffix)
	if err != nil {
		return err
	}
	if _, err := c.postJSON(ctx, path, req, nil); err != nil {
		return fmt.Errorf("unlock %q: %w", req.Key, err)
	}
	return nil
}
