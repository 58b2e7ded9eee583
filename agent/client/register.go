package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Register announces the agent with a registration token and returns its own token and the
// intervals the server dictates. It is safe to repeat.
func (c *Client) Register(ctx context.Context, registrationToken string, req protocol.RegisterRequest) (protocol.RegisterResponse, error) {
	var resp protocol.RegisterResponse
	if registrationToken == "" {
		return resp, errors.New("client: register: no registration token")
	}
	body, err := jsonBody(req)
	if err != nil {
		return resp, err
	}
	_, err = c.call(ctx, request{method: http.MethodPost, path: protocol.PathRegister, body: body,
		contentType: "application/json", token: registrationToken, out: &resp})
	if err != nil {
		return resp, fmt.Errorf("register: %w", err)
	}
	if resp.Token == "" {
		return resp, errors.New("client: register: the server answered without an agent token")
	}
	return resp, nil
}
