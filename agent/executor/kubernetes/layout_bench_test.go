package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
)

// BenchmarkPodLayout prices the layout chosen (README: one pod per pipeline, a container per
// image, steps exec'ed in) against the other one (a pod per job) on one 3-stage pipeline on the
// real test cluster: the chosen layout starts one pod and runs three steps in it; a pod per job
// starts a pod for each stage's job (its scheduling, its sandbox, the tools and the checkout put
// into it) and runs the job there. The second is what a pod per job costs at the least: a real
// one would also attach a shared volume to each pod, which is not cheaper than the copy. Each
// pipeline's steps are `echo`, so what is measured is the layout.
//
// Alone: e2e/testenv.sh go test -run '^$' -bench PodLayout -benchtime 3x ./agent/executor/kubernetes
func BenchmarkPodLayout(b *testing.B) {
	k := newKubeB(b)
	checkout := b.TempDir()
	if err := os.WriteFile(filepath.Join(checkout, "train.sh"), []byte("echo train\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	images := []executor.PipelineImage{{Name: kubeImageA}}
	ctx := context.Background()
	step := func(i int) executor.Step {
		return executor.Step{Image: kubeImageA, Script: "echo stage " + string(rune('0'+i)), Checkout: checkout}
	}
	var onePod, podPerJob time.Duration
	for range b.N {
		begin := time.Now()
		spec := executor.PipelineSpec{Lease: "one-" + randHex(6), Checkout: checkout, Images: images}
		if err := k.StartPipeline(ctx, spec); err != nil {
			b.Fatal(err)
		}
		for i := range 3 {
			if code, err := k.Run(ctx, step(i)); err != nil || code != 0 {
				b.Fatalf("step %d: %d %v", i, code, err)
			}
		}
		k.EndPipeline(checkout)
		onePod += time.Since(begin)

		begin = time.Now()
		for i := range 3 {
			spec := executor.PipelineSpec{Lease: "job-" + randHex(6), Checkout: checkout, Images: images}
			if err := k.StartPipeline(ctx, spec); err != nil {
				b.Fatal(err)
			}
			if code, err := k.Run(ctx, step(i)); err != nil || code != 0 {
				b.Fatalf("job %d: %d %v", i, code, err)
			}
			k.EndPipeline(checkout)
		}
		podPerJob += time.Since(begin)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((onePod / n).Milliseconds()), "pod-per-pipeline-ms")
	b.ReportMetric(float64((podPerJob / n).Milliseconds()), "pod-per-job-ms")
	b.Logf("a 3-stage pipeline: one pod %v, a pod per job %v (%.1f×), mean of %d",
		(onePod / n).Round(time.Millisecond), (podPerJob / n).Round(time.Millisecond), float64(podPerJob)/float64(onePod), b.N)
}
