package build_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Commit statuses: the newest state of a context wins, what is refused, and a commit's check
// state from its statuses and the pipelines that ran on it.
func TestCommitStatuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		sha := f.commit("ci", map[string]string{".cnb.yml": "main:\n  push:\n    - name: train\n      stages: [ { name: t, script: echo t } ]\n"})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		r := f.access.Repo
		set := func(in build.StatusInput) (*build.CommitStatus, error) {
			return f.builds.SetStatus(ctx, r, sha, f.user.ID, 0, in)
		}
		for _, c := range []struct {
			name string
			sha  string
			in   build.StatusInput
			want int
		}{
			{"an unknown state", sha, build.StatusInput{State: "green"}, 422},
			{"a URL that is not http", sha, build.StatusInput{State: "success", TargetURL: "file:///etc/passwd"}, 422},
			{"a context with a newline", sha, build.StatusInput{State: "success", Context: "a\nb"}, 422},
			{"a short SHA", sha[:7], build.StatusInput{State: "success"}, 404},
			{"an unknown commit", "0123456789012345678901234567890123456789", build.StatusInput{State: "success"}, 404},
		} {
			if _, err := f.builds.SetStatus(ctx, r, c.sha, f.user.ID, 0, c.in); errStatus(err) != c.want {
				t.Errorf("%s: %v, want %d", c.name, err, c.want)
			}
		}
		checks := func() *build.CommitChecks {
			t.Helper()
			cc, err := f.builds.ChecksOf(ctx, r.ID, sha)
			if err != nil {
				t.Fatal(err)
			}
			// The batched read of a page of commits agrees, and leaves out a commit without checks.
			none := "0123456789012345678901234567890123456789"
			states, err := f.builds.StatesOf(ctx, r.ID, []string{none, sha})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := states[none]; states[sha] != cc.State || ok || len(states) != 1 {
				t.Fatalf("StatesOf %v, ChecksOf %q", states, cc.State)
			}
			return cc
		}
		// The push build's pipeline is queued: pending.
		if cc := checks(); cc.State != build.StatePending || len(cc.Pipelines) != 1 || cc.Pipelines[0].Name != "train" || len(cc.Statuses) != 0 {
			t.Fatalf("checks with a queued pipeline: %+v", cc)
		}
		db.Model(&build.Pipeline{}).Where("name = ?", "train").Update("status", build.StatusSuccess)
		if cc := checks(); cc.State != build.StateSuccess {
			t.Fatalf("checks with a green pipeline: %+v", cc)
		}
		if _, err := set(build.StatusInput{Context: "eval", State: build.StatePending, TargetURL: "https://ci.example.com/1"}); err != nil {
			t.Fatal(err)
		}
		if cc := checks(); cc.State != build.StatePending {
			t.Fatalf("checks with a pending status: %+v", cc)
		}
		st, err := set(build.StatusInput{Context: "eval", State: build.StateFailure, Description: "loss went up"})
		if err != nil || st.State != build.StateFailure || st.TargetURL != "" || st.Description != "loss went up" {
			t.Fatalf("the newest state: %+v %v", st, err)
		}
		cc := checks()
		if cc.State != build.StateFailure || len(cc.Statuses) != 1 || cc.Statuses[0].Context != "eval" {
			t.Fatalf("checks with a failed status: %+v", cc)
		}
		if def, err := set(build.StatusInput{State: build.StateSuccess}); err != nil || def.Context != "default" {
			t.Fatalf("the default context: %+v %v", def, err)
		}
	})
}
