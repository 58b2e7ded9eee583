package runner

import (
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// git:auto-merge's options, as CNB names them, become the merge call; what cannot work is
// refused before anything reaches the server.
func TestAutoMergeRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		opts map[string]any
		want protocol.MergeRequest
		err  string
	}{
		{"no options", nil, protocol.MergeRequest{Mode: "auto"}, ""},
		{"squash, message and footer, delete", map[string]any{"mergeType": "Squash", "mergeCommitMessage": "Tune lr\n",
			"mergeCommitFooter": "Reviewed-by: bob", "removeSourceBranch": true, "ignoreAssignee": true},
			protocol.MergeRequest{Mode: "squash", Message: "Tune lr\n\nReviewed-by: bob", DeleteSourceBranch: true}, ""},
		{"rebase as a string bool", map[string]any{"mergeType": "rebase", "removeSourceBranch": "false"}, protocol.MergeRequest{Mode: "rebase"}, ""},
		{"an unknown type", map[string]any{"mergeType": "octopus"}, protocol.MergeRequest{}, `option mergeType: "octopus"`},
		{"a footer alone", map[string]any{"mergeCommitFooter": "x"}, protocol.MergeRequest{}, "needs mergeCommitMessage"},
		{"a list for a message", map[string]any{"mergeCommitMessage": []any{"a"}}, protocol.MergeRequest{}, "option mergeCommitMessage"},
	} {
		got, err := autoMergeRequest(c.opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %+v %v, want an error with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
}
