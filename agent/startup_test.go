package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A GPU host serves CPU classes only when its operator names them: CPU pipelines must never
// hold a GPU host by default.
func TestServedTags(t *testing.T) {
	l40 := []protocol.GPU{{Index: 0, Name: "NVIDIA L40"}}
	for _, tc := range []struct {
		name       string
		configured []string
		gpus       []protocol.GPU
		want       []string
	}{
		{"a CPU host by default", nil, nil, []string{"cnb:arch:default", "cnb:arch:amd64"}},
		{"a GPU host by default: GPU tags only", nil, l40, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:L40"}},
		{"a GPU host told to serve CPU too", []string{"cnb:arch:amd64"}, l40, []string{"cnb:arch:amd64", "cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:L40"}},
		{"a CPU host with its own tags", []string{"team:big"}, nil, []string{"team:big"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := servedTags(tc.configured, tc.gpus); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Jobs are handed the agent's server URL: a loopback one only works on the host's network, and
// the agent says so at start.
func TestUnreachableServer(t *testing.T) {
	for _, tc := range []struct {
		url, network string
		warn         bool
	}{
		{"http://127.0.0.1:8080", "", true},
		{"http://localhost:8080", "bridge", true},
		{"http://[::1]:8080", "none", true},
		{"http://127.0.0.1:8080", "host", false},
		{"http://nimbus.internal:8080", "", false},
		{"http://10.0.0.5:8080", "", false},
	} {
		got := unreachableServer(tc.url, tc.network)
		if (got != "") != tc.warn || tc.warn && !strings.Contains(got, "NIMBUS_AGENT_NETWORK=host") {
			t.Errorf("%s on network %q: %q", tc.url, tc.network, got)
		}
	}
}
