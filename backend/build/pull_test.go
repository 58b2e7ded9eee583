package build_test

import (
	"context"
	"encoding/json"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

const pullConfig = `
main:
  pull_request:
    - name: check
      # CNB's common pattern: one run a request, the newest push winning.
      lock: { key: "pr-${CNB_PULL_REQUEST_IID}", cancel-in-progress: true }
      stages: [ { name: t, script: "echo $CNB_PULL_REQUEST_IID" } ]
    - name: docs-only
      ifModify: ["docs/**"]
      stages: [ { name: d, script: echo docs } ]
  pull_request.target:
    - name: trusted
      stages: [ { name: t, script: echo target } ]
`

// A pull request's events plan the config of the commit each runs, select pipelines by the
// target branch, see the request's changed files in ifModify, link the build to the request and
// carry the CNB_PULL_REQUEST* variables.
func TestPullEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		base := f.commit("ci", map[string]string{".cnb.yml": pullConfig})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		f.git("checkout", "-q", "-b", "feature")
		head := f.commit("change the model", map[string]string{"src/model.py": "layers = 4\n"})
		f.push("refs/heads/feature", git.ZeroSHA, "feature")

		pr := build.PullEvent{Action: "created", ID: 11, Number: 7, Title: "Four layers", Proposer: "alice",
			SourceBranch: "feature", TargetBranch: "main", SourceSlug: "team/trainer", HeadSHA: head, BaseSHA: base,
			MergeSHA: head, MergeBase: base, URL: "http://nimbus.test/team/trainer/-/pulls/7"}
		onPull, onTarget := pr, pr
		onPull.Event, onPull.Commit = build.EventPull, head // the fast-forward merge is the head itself
		onTarget.Event, onTarget.Commit = build.EventPullTarget, base
		bs := f.builds.OnPull(context.Background(), f.access.Repo.ID, f.user, []build.PullEvent{onPull, onTarget})
		if len(bs) != 2 {
			t.Fatalf("%d builds, want one per event", len(bs))
		}
		for i, want := range []struct {
			event, commit string
			pipelines     []string
		}{{build.EventPull, head, []string{"check"}}, {build.EventPullTarget, base, []string{"trusted"}}} {
			b := bs[i]
			if b.Event != want.event || b.Branch != "main" || b.CommitSHA != want.commit || b.PullNumber == nil || *b.PullNumber != 7 {
				t.Fatalf("build %d: %+v", i, b)
			}
			var ps []build.Pipeline
			db.Where("build_id = ?", b.ID).Order("position").Find(&ps)
			var names []string
			for _, p := range ps {
				var plan protocol.Plan
				if err := json.Unmarshal([]byte(p.Plan), &plan); err != nil {
					t.Fatal(err)
				}
				if plan.Conditions.Skip == "" {
					names = append(names, p.Name) // the pipelines that run
				}
				if p.Name == "check" && (plan.Lock == nil || plan.Lock.Key != "pr-7" || !plan.Lock.CancelInProgress) {
					t.Fatalf("check's lock %+v, want the key pr-7, cancel-in-progress", plan.Lock)
				}
				v := plan.Builtins
				if v["CNB_PULL_REQUEST_IID"] != "7" || v["CNB_PULL_REQUEST_ID"] != "11" || v["CNB_PULL_REQUEST"] != "true" ||
					v["CNB_PULL_REQUEST_BRANCH"] != "feature" || v["CNB_PULL_REQUEST_SHA"] != head || v["CNB_PULL_REQUEST_TARGET_SHA"] != base ||
					v["CNB_BRANCH"] != "main" || v["CNB_EVENT"] != want.event || v["CNB_EVENT_URL"] != pr.URL || v["CNB_PULL_REQUEST_PROPOSER"] != "alice" {
					t.Fatalf("%s: builtins %v", want.event, v)
				}
			}
			// docs-only's ifModify does not match the request's one changed file: it is skipped.
			if len(names) != len(want.pipelines) || names[0] != want.pipelines[0] {
				t.Fatalf("%s: pipelines %v, want %v", want.event, names, want.pipelines)
			}
		}
		// A pre-merged event of a request that conflicts (no merge commit) runs nothing.
		conflicting := onPull
		conflicting.Commit, conflicting.MergeSHA = "", ""
		if bs := f.builds.OnPull(context.Background(), f.access.Repo.ID, f.user, []build.PullEvent{conflicting}); len(bs) != 0 {
			t.Fatalf("a conflicting request's pull_request made %d builds", len(bs))
		}
	})
}
