package runner

import (
	"slices"
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

// git:reviewer's options, as CNB names them.
func TestReviewersRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		opts map[string]any
		want protocol.ReviewersRequest
		err  string
	}{
		{"comma-separated", map[string]any{"reviewers": "bob, carol"}, protocol.ReviewersRequest{Add: []string{"bob", "carol"}}, ""},
		{"a list to remove", map[string]any{"type": "remove-reviewer", "reviewers": []any{"bob"}}, protocol.ReviewersRequest{Remove: []string{"bob"}}, ""},
		{"picked from the members", map[string]any{"type": "add-reviewer-from-repo-members", "count": "2"}, protocol.ReviewersRequest{Pick: 2}, ""},
		{"one picked by default", map[string]any{"type": "add-reviewer-from-group-members"}, protocol.ReviewersRequest{Pick: 1}, ""},
		{"nobody named", map[string]any{}, protocol.ReviewersRequest{}, "name whom to ask"},
		{"an unknown type", map[string]any{"type": "assign"}, protocol.ReviewersRequest{}, `option type: "assign"`},
		{"a count of 11", map[string]any{"type": "add-reviewer-from-repo-members", "count": 11}, protocol.ReviewersRequest{}, "option count"},
	} {
		got, err := reviewersRequest(c.opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %+v %v, want an error with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.Add, c.want.Add) || !slices.Equal(got.Remove, c.want.Remove) || got.Pick != c.want.Pick {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
}
