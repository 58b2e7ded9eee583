package reqlog

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestHandlerStampsRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "json", "info").With("component", "test")
	ctx := WithID(context.Background(), "req-123")
	log.InfoContext(ctx, "inside a request")
	log.Info("outside a request")
	log.DebugContext(ctx, "below the level")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["request_id"] != "req-123" || first["component"] != "test" {
		t.Fatalf("first line: %v", first)
	}
	if _, ok := second["request_id"]; ok {
		t.Fatalf("second line has a request id: %v", second)
	}
}
