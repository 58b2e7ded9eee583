package agent

import (
	"slices"
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
