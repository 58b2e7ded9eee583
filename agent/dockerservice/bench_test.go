package dockerservice

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"
)

// BenchmarkEngineStart measures what the docker service adds to a pipeline's start: from Start
// to `docker version` answering through the job's CLI, and the teardown after it. Target
// (issue 14): p50 under 2 s. Run with -benchtime=Nx; each iteration is one engine.
func BenchmarkEngineStart(b *testing.B) {

	r := newRig(b, Config{Mode: ModeRootless})
	var ready, stops []time.Duration
	for i := 0; b.Loop(); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		checkout := b.TempDir()
		began := time.Now()
		e, err := r.m.Start(ctx, Spec{ID: fmt.Sprintf("bench-%d", i), Checkout: checkout, Mount: "/workspace"})
		if err != nil {
			b.Fatal(err)
		}
		if out, err := docker(ctx, e, "version", "--format", "{{.Server.Version}}"); err != nil {
			b.Fatalf("docker version: %v: %s", err, out)
		}
		ready = append(ready, time.Since(began))
		stopped := time.Now()
		if err := e.Stop(); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, time.Since(stopped))
		cancel()
	}
	p50 := median(ready)
	b.ReportMetric(p50.Seconds(), "p50-start-s")
	b.ReportMetric(ready[len(ready)-1].Seconds(), "max-start-s")
	b.ReportMetric(median(stops).Seconds(), "p50-stop-s")
	// The figure is reported, not enforced: a loaded machine must not fail the build.
	b.Logf("engine start to docker version: p50 %v over %d (%v); stop p50 %v [target p50 < 2 s]", p50.Round(time.Millisecond), len(ready), ready, median(stops).Round(time.Millisecond))
}

// median sorts d in place and returns its middle value.
func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
