package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// AppendLog sends the bytes of a job's log that start at offset and returns the offset the
// server has stored. That offset may be below offset+len(data) (the server kept less) or not
// even reach offset (it lost a tail): the caller resends from it, which is safe because the
// server keeps what it has and ignores what it already holds.
func (c *Client) AppendLog(ctx context.Context, leaseID string, jobID, offset int64, data []byte) (int64, error) {
	path, err := leasePath(leaseID, "jobs/"+strconv.FormatInt(jobID, 10)+"/log?offset="+strconv.FormatInt(offset, 10))
	if err != nil {
		return 0, err
	}
	var ack protocol.LogAck
	if _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: data,
		contentType: "application/octet-stream", out: &ack}); err != nil {
		return 0, fmt.Errorf("log of job %d at %d: %w", jobID, offset, err)
	}
	return ack.Offset, nil
}
