package build_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A pipeline that waited for its place after its lease (protocol.Event.Waited: a Kubernetes pod
// Pending) runs from its pipeline_started: its started_at moves there and the OnStarted
// subscribers hear it once; a pipeline_started without Waited, or a repeated one, moves nothing.
func TestAWaitedPipelineStartsWhenItRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		type heard struct {
			id int64
			at time.Time
		}
		var got []heard
		f.builds.OnStarted(func(_ context.Context, id int64, at time.Time) { got = append(got, heard{id, at}) })
		f.commit("ci", map[string]string{".cnb.yml": "main:\n  push:\n    - stages:\n        - name: train\n          script: echo train\n"})
		bs := f.push("refs/heads/main", "0000000000000000000000000000000000000000", "HEAD:refs/heads/main")
		var p build.Pipeline
		if err := f.db.Where("build_id = ?", bs[0].ID).Take(&p).Error; err != nil {
			t.Fatal(err)
		}
		lease := build.Lease{ID: "lease-late", AgentID: "agent-1", ExpiresAt: f.clock.Now().Add(time.Hour)}
		claimed, err := f.builds.Claim(ctx, p.ID, lease)
		if err != nil || claimed == nil {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		dispatched := *claimed.StartedAt
		startedAt := func() time.Time {
			var q build.Pipeline
			if err := f.db.Take(&q, p.ID).Error; err != nil {
				t.Fatal(err)
			}
			return q.StartedAt.UTC()
		}

		f.clock.Advance(30 * time.Second)
		if err := f.builds.Event(ctx, "agent-1", lease.ID, protocol.Event{Kind: protocol.EventPipelineStarted, At: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if !startedAt().Equal(dispatched.UTC()) || len(got) != 0 {
			t.Fatalf("a pipeline that did not wait moved its start: %v, heard %v", startedAt(), got)
		}
		f.clock.Advance(90 * time.Second)
		ran := f.clock.Now().UTC()
		for range 2 {
			if err := f.builds.Event(ctx, "agent-1", lease.ID, protocol.Event{Kind: protocol.EventPipelineStarted, Waited: true, At: ran}); err != nil {
				t.Fatal(err)
			}
		}
		if !startedAt().Equal(ran) {
			t.Fatalf("started_at %v, want %v (when it ran)", startedAt(), ran)
		}
		if len(got) != 1 || got[0].id != p.ID || !got[0].at.Equal(ran) {
			t.Fatalf("OnStarted heard %v, want pipeline %d at %v once", got, p.ID, ran)
		}
	})
}

// A leased pipeline whose agent has no place for it yet says why (protocol.EventWaiting): a
// running pipeline, waiting, its one blocker `capacity` with the agent's words; "" clears it,
// and so do its pipeline_started (waited) and its first job_started. Too long a reason is
// refused, and nothing is written.
func TestAWaitingPipelineShowsItsReason(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": "main:\n  push:\n    - stages:\n        - name: train\n          script: echo train\n"})
		bs := f.push("refs/heads/main", "0000000000000000000000000000000000000000", "HEAD:refs/heads/main")
		var p build.Pipeline
		if err := f.db.Where("build_id = ?", bs[0].ID).Take(&p).Error; err != nil {
			t.Fatal(err)
		}
		lease := build.Lease{ID: "lease-wait", AgentID: "agent-1", ExpiresAt: f.clock.Now().Add(time.Hour)}
		if claimed, err := f.builds.Claim(ctx, p.ID, lease); err != nil || claimed == nil {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		h := build.NewHandler(build.HandlerConfig{Service: f.builds, Repos: f.repos, Log: f.log})
		shown := func() build.PipelineJSON {
			t.Helper()
			b, err := h.Describe(ctx, bs[0].RepoID, bs[0].Number)
			if err != nil || len(b.Pipelines) != 1 {
				t.Fatalf("pipelines %+v %v", b, err)
			}
			return b.Pipelines[0]
		}
		const why = "waiting for a node with a free nvidia.com/gpu (0/1 nodes are available: 1 Insufficient nvidia.com/gpu; the cluster may be scaling up)"
		event := func(ev protocol.Event) error {
			ev.At = f.clock.Now()
			return f.builds.Event(ctx, "agent-1", lease.ID, ev)
		}
		if err := event(protocol.Event{Kind: protocol.EventWaiting, Reason: why}); err != nil {
			t.Fatal(err)
		}
		if pj := shown(); pj.Status != build.StatusRunning || !pj.Waiting || len(pj.Blockers) != 1 ||
			pj.Blockers[0].Code != build.BlockerCapacity || pj.Blockers[0].Message != why {
			t.Fatalf("a waiting pipeline shows %+v", pj)
		}
		if err := event(protocol.Event{Kind: protocol.EventWaiting, Reason: strings.Repeat("x", protocol.MaxWaitReason+1)}); err == nil {
			t.Fatal("a reason over the bound was taken")
		}
		if pj := shown(); len(pj.Blockers) != 1 || pj.Blockers[0].Message != why {
			t.Fatalf("a refused reason changed the shown one: %+v", pj.Blockers)
		}
		for _, clear := range []protocol.Event{{Kind: protocol.EventWaiting}, {Kind: protocol.EventPipelineStarted, Waited: true}} {
			if err := event(protocol.Event{Kind: protocol.EventWaiting, Reason: why}); err != nil {
				t.Fatal(err)
			}
			if err := event(clear); err != nil {
				t.Fatal(err)
			}
			if pj := shown(); pj.Waiting || len(pj.Blockers) != 0 {
				t.Fatalf("after %s the pipeline still waits: %+v", clear.Kind, pj.Blockers)
			}
		}
	})
}
