package build_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// finishWithMetrics claims build b's pipeline under a lease and finishes its job reporting
// metrics, as an agent does.
func (f *fixture) finishWithMetrics(b *build.Build, metrics map[string]float64) (pipelineID int64, err error) {
	f.t.Helper()
	ctx := context.Background()
	var p build.Pipeline
	if err := f.db.Where("build_id = ?", b.ID).Take(&p).Error; err != nil {
		f.t.Fatal(err)
	}
	var j build.Job
	if err := f.db.Where("pipeline_id = ?", p.ID).Take(&j).Error; err != nil {
		f.t.Fatal(err)
	}
	lease := build.Lease{ID: "lease-" + b.CommitSHA[:8], AgentID: "agent-1", ExpiresAt: f.clock.Now().Add(3600e9)}
	if got, err := f.builds.Claim(ctx, p.ID, lease); err != nil || got == nil {
		f.t.Fatalf("claim: %v %v", got, err)
	}
	code := 0
	return p.ID, f.builds.Event(ctx, "agent-1", lease.ID, protocol.Event{Kind: protocol.EventJobFinished, JobID: j.ID,
		Status: build.StatusSuccess, ExitCode: &code, Metrics: metrics, At: f.clock.Now()})
}

func TestMetricsSeriesAcrossBuilds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		const file = "main:\n  push:\n    - stages:\n        - name: train\n          script: echo train\n"
		old := "0000000000000000000000000000000000000000"
		var pipelines []int64
		for i, acc := range []float64{0.71, 0.83, 0.79} {
			sha := f.commit("commit", map[string]string{".cnb.yml": file, "n": string(rune('a' + i))})
			bs := f.push("refs/heads/main", old, "HEAD:refs/heads/main")
			old = sha
			if len(bs) != 1 {
				t.Fatalf("push %d: %d builds", i, len(bs))
			}
			pid, err := f.finishWithMetrics(bs[0], map[string]float64{"accuracy": acc, "loss": 1 - acc})
			if err != nil {
				t.Fatal(err)
			}
			pipelines = append(pipelines, pid)
		}
		names, err := f.builds.MetricNames(ctx, f.access.Repo.ID, "main")
		if err != nil || len(names) != 2 || names[0] != "accuracy" || names[1] != "loss" {
			t.Fatalf("names %v %v", names, err)
		}
		pts, err := f.builds.Series(ctx, f.access.Repo.ID, "main", "accuracy")
		if err != nil || len(pts) != 3 {
			t.Fatalf("series %+v %v", pts, err)
		}
		for i, want := range []float64{0.71, 0.83, 0.79} {
			p := pts[i]
			if p.Value != want || p.Build != int64(i+1) || p.PipelineID != pipelines[i] || len(p.Commit) != 40 {
				t.Errorf("point %d: %+v", i, p)
			}
			if (i == 0) != (p.PreviousPipelineID == nil) || i > 0 && *p.PreviousPipelineID != pipelines[i-1] {
				t.Errorf("point %d's previous pipeline: %v", i, p.PreviousPipelineID)
			}
		}
		if other, _ := f.builds.Series(ctx, f.access.Repo.ID, "dev", "accuracy"); len(other) != 0 {
			t.Errorf("another branch's series: %+v", other)
		}

		// A client that sends what the agent would not is refused, and nothing is kept.
		f.commit("bad", map[string]string{"n": "z"})
		bs := f.push("refs/heads/main", old, "HEAD:refs/heads/main")
		if _, err := f.finishWithMetrics(bs[0], map[string]float64{"bad name": 1}); err == nil {
			t.Error("a metric with a bad name was taken")
		}
		if pts, _ := f.builds.Series(ctx, f.access.Repo.ID, "main", "accuracy"); len(pts) != 3 {
			t.Errorf("after a refused report: %d points", len(pts))
		}
	})
}

// A request's metrics stay out of its target's series, and compare with the target's latest
// successful build: the delta, and which way is better, declared (NIMBUS_METRICS_BETTER) or
// guessed from the name.
func TestPullMetricsAgainstTheTarget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		const cnb = "main:\n  push:\n    - stages: [ { name: train, script: echo train } ]\n" +
			"  pull_request:\n    - env: { NIMBUS_METRICS_BETTER: 'recall=lower, nonsense=up' }\n      stages: [ { name: eval, script: echo eval } ]\n"
		base := f.commit("ci", map[string]string{".cnb.yml": cnb})
		bs := f.push("refs/heads/main", git.ZeroSHA, "main")
		if _, err := f.finishWithMetrics(bs[0], map[string]float64{"val_loss": 0.40, "accuracy": 0.80, "recall": 0.5}); err != nil {
			t.Fatal(err)
		}
		// Only a successful build of the target counts: this one ends so.
		if _, ended, err := f.builds.Finish(ctx, "agent-1", "lease-"+bs[0].CommitSHA[:8], protocol.FinishRequest{Status: build.StatusSuccess}); err != nil || !ended {
			t.Fatalf("finish the push build: %v %v", ended, err)
		}
		f.git("checkout", "-q", "-b", "tune")
		head := f.commit("tune", map[string]string{"lr.txt": "0.01\n"})
		f.push("refs/heads/tune", git.ZeroSHA, "tune")
		ev := build.PullEvent{Event: build.EventPull, Action: "created", Commit: head, ID: 1, Number: 4, Title: "Tune", Proposer: "alice",
			SourceBranch: "tune", TargetBranch: "main", SourceSlug: "team/trainer", HeadSHA: head, BaseSHA: base, MergeSHA: head, MergeBase: base}
		prs := f.builds.OnPull(ctx, f.access.Repo.ID, f.user, []build.PullEvent{ev})
		if len(prs) != 1 {
			t.Fatalf("%d pull_request builds", len(prs))
		}
		if _, err := f.finishWithMetrics(prs[0], map[string]float64{"val_loss": 0.30, "accuracy": 0.80, "recall": 0.6, "new_metric": 1}); err != nil {
			t.Fatal(err)
		}
		if pts, _ := f.builds.Series(ctx, f.access.Repo.ID, "main", "val_loss"); len(pts) != 1 {
			t.Errorf("the request's metric landed in main's series: %+v", pts)
		}
		got, err := f.builds.PullMetrics(ctx, f.access.Repo.ID, 4, "main")
		if err != nil {
			t.Fatal(err)
		}
		summary := map[string]string{}
		for _, d := range got {
			s := d.Better + " " + d.Verdict
			if d.Declared {
				s += " declared"
			}
			if d.Delta != nil {
				s += fmt.Sprintf(" %+.2f", *d.Delta)
			}
			summary[d.Name] = s
		}
		want := map[string]string{
			"accuracy":   "higher same +0.00",
			"new_metric": "higher ",
			"recall":     "lower worse declared +0.10",
			"val_loss":   "lower better -0.10",
		}
		if !maps.Equal(summary, want) {
			t.Errorf("deltas %v, want %v", summary, want)
		}
		if got[3].Head.Build != prs[0].Number || got[3].Base.Build != bs[0].Number {
			t.Errorf("val_loss compares build #%d with #%d", got[3].Head.Build, got[3].Base.Build)
		}
	})
}
