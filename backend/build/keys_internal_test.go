package build

import (
	"testing"
	"time"
)

func TestAwaitedTime(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	now := *at(100)
	jobs := []Job{
		// pipeline 1: two awaits in parallel (10–40, 20–30) and a later one (50–60): 40 s.
		{PipelineID: 1, Type: TaskAwait, StartedAt: at(10), FinishedAt: at(40)},
		{PipelineID: 1, Type: TaskAwait, StartedAt: at(20), FinishedAt: at(30)},
		{PipelineID: 1, Type: TaskAwait, StartedAt: at(50), FinishedAt: at(60)},
		{PipelineID: 1, Type: "", StartedAt: at(0), FinishedAt: at(100)}, // a script: run time
		// pipeline 2: an await still running since 70: 30 s so far; one never started.
		{PipelineID: 2, Type: TaskAwait, StartedAt: at(70)},
		{PipelineID: 2, Type: TaskAwait},
		// pipeline 3: only a resolve.
		{PipelineID: 3, Type: "cnb:resolve", StartedAt: at(0), FinishedAt: at(5)},
	}
	got := awaitedTime(jobs, now)
	want := map[int64]time.Duration{1: 40 * time.Second, 2: 30 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("awaitedTime = %v, want %v", got, want)
	}
	for id, d := range want {
		if got[id] != d {
			t.Errorf("pipeline %d awaited %s, want %s", id, got[id], d)
		}
	}
}
