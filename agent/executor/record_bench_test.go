package executor

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// BenchmarkRecordOverhead measures what the reproducibility record costs a three-job pipeline
// on the agent (issue 17's target: under 5 % of its wall time). The agent's share of the record
// is asking the engine, after each container is created, which image it runs by digest
// (ImageSeen: a container and an image inspect); the server's share rides on writes it makes
// anyway (the lease's UPDATE, job_finished's UPDATE) and is not measured here.
//
// Each round runs the three jobs (busybox, `true`) without and with ImageSeen, alternating so
// drift hits both; it reports both walls and the overhead, and the digest lookup timed alone on
// a created container, which is the overhead without the containers' noise.
func BenchmarkRecordOverhead(b *testing.B) {
	d, image := newDocker(b)
	ctx := context.Background()
	checkout := b.TempDir()
	run3 := func(seen func(ref, digest string)) time.Duration {
		start := time.Now()
		for i := range 3 {
			code, err := d.Run(ctx, Step{Name: "job" + string(rune('a'+i)), Image: image, Script: "true", Checkout: checkout, ImageSeen: seen})
			if err != nil || code != 0 {
				b.Fatalf("job: %d %v", code, err)
			}
		}
		return time.Since(start)
	}
	digests := 0
	seen := func(_, digest string) {
		if digest != "" {
			digests++
		}
	}
	var bare, recorded time.Duration
	for b.Loop() {
		bare += run3(nil)
		recorded += run3(seen)
	}
	if digests != 3*b.N {
		b.Fatalf("%d digests for %d jobs", digests, 3*b.N)
	}

	// The lookup alone, on one created (not started) container.
	probe := Step{Name: "probe", Image: image, Script: "true", Checkout: checkout}
	cfg, host, err := d.containerConfig(ctx, probe, stepCommand(probe), nil)
	if err != nil {
		b.Fatal(err)
	}
	id, err := d.createContainer(ctx, probe, cfg, host)
	if err != nil {
		b.Fatal(err)
	}
	defer d.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	const lookups = 50
	start := time.Now()
	for range lookups {
		if _, err := d.imageDigest(ctx, id, image); err != nil {
			b.Fatal(err)
		}
	}
	lookup := time.Since(start) / lookups

	n := time.Duration(b.N)
	b.ReportMetric(float64((bare / n).Milliseconds()), "ms/pipeline-bare")
	b.ReportMetric(float64((recorded / n).Milliseconds()), "ms/pipeline-recorded")
	b.ReportMetric(100*float64(recorded-bare)/float64(bare), "%-wall-diff")
	b.ReportMetric(float64(lookup.Microseconds()), "µs/digest-lookup")
	b.ReportMetric(100*float64(3*lookup)/float64(bare/n), "%-overhead")
}
