package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// fiftyJobs is a 50-job GPU pipeline (10 stages of 5 parallel jobs, each its own image from the
// built-in registry) as the build side keeps it after the run, with 8 GPUs on its host, 5 repo
// secrets and 8 model files moved: a large pipeline, for the record's storage target.
func fiftyJobs() Inputs {
	in := sample()
	rec := *in.Rec
	host := build.HostSnapshot{AgentID: "agt_0123456789abcdef", Name: "gpu-node-17.example.internal", Version: "1.4.0-3-gdeadbeef",
		Executor: "docker", Host: protocol.HostFacts{OS: "linux/amd64", Kernel: "6.1.0-28-cloud-amd64",
			CPUModel: "AMD EPYC 9654 96-Core Processor", GPUDriver: "550.54.15", CUDAVersion: "12.4", Engine: "26.1.5+dfsg1"}}
	for i := range 8 {
		host.GPUs = append(host.GPUs, protocol.GPU{Index: i, UUID: fmt.Sprintf("GPU-%08d-1111-2222-3333-444444444444", i), Name: "NVIDIA L40", MemoryMiB: 46068})
	}
	raw, _ := json.Marshal(host)
	rec.Pipeline.Host = string(raw)
	rec.Pipeline.SecretNames = `["HF_TOKEN","WANDB_API_KEY","S3_ACCESS_KEY","S3_SECRET_KEY","SLACK_WEBHOOK"]`
	rec.Stages, rec.Jobs = nil, nil
	rec.Plan.Stages = nil
	for s := range 10 {
		st := protocol.Stage{Name: fmt.Sprintf("stage %d", s), Parallel: true}
		rec.Stages = append(rec.Stages, build.Stage{ID: int64(s + 1), Position: s, Name: st.Name, Parallel: true, Status: build.StatusSuccess})
		for j := range 5 {
			image := fmt.Sprintf("nimbus.example.com/ml/trainer/env-%d:py3.11-cuda12.4", s*5+j)
			st.Jobs = append(st.Jobs, protocol.Job{Key: fmt.Sprintf("job-%d", j), Name: fmt.Sprintf("shard %d", j), Kind: protocol.KindScript,
				Script: "python train.py --shard " + fmt.Sprint(j), Image: &protocol.Image{Name: image}, Env: map[string]string{"SHARD": fmt.Sprint(j)}})
			rec.Jobs = append(rec.Jobs, build.Job{ID: int64(100 + s*5 + j), StageID: int64(s + 1), Position: j, Name: fmt.Sprintf("shard %d", j),
				Status: build.StatusSuccess, ExitCode: ptr(0), StartedAt: at(s), FinishedAt: at(s + 1), Image: image,
				ImageDigest: strings.Split(image, ":py")[0] + "@sha256:" + strings.Repeat(fmt.Sprintf("%x", s*5+j), 64)[:64]})
		}
		rec.Plan.Stages = append(rec.Plan.Stages, st)
	}
	plan, _ := json.Marshal(rec.Plan)
	rec.Pipeline.Plan = string(plan)
	in.Rec = &rec
	in.Pushed, in.Pulled = nil, nil
	for i := range 4 {
		in.Pulled = append(in.Pulled, Moved{Repo: "ml/trainer", Package: "data", Version: "nimbus-70", File: fmt.Sprintf("shard-%d.tgz", i),
			Digest: "sha256:" + strings.Repeat("d", 64), Size: 1 << 30, BuildScoped: true})
		in.Pushed = append(in.Pushed, Moved{Repo: "ml/trainer", Package: "model", Version: commitA, File: fmt.Sprintf("model-%d.safetensors", i),
			Digest: "sha256:" + strings.Repeat("e", 64), Size: 1 << 32})
	}
	return in
}

// storedBytes is what the record adds to the database for one pipeline: the columns that
// exist only for it (the lease's host snapshot and secret names, each job's image and digest)
// and the artifact_uses rows (six 8-byte numbers and their strings). The plan, statuses and
// timings are kept anyway, to run the pipeline and show it.
func storedBytes(in Inputs) int {
	r := in.Rec
	n := len(r.Pipeline.Host) + len(r.Pipeline.SecretNames)
	for _, j := range r.Jobs {
		n += len(j.Image) + len(j.ImageDigest)
	}
	for _, m := range append(append([]Moved(nil), in.Pushed...), in.Pulled...) {
		n += 6*8 + len("push") + len(m.Package) + len(m.Version) + len(m.File) + len(m.Digest)
	}
	return n
}

// BenchmarkRecord50Jobs makes the record of a 50-job pipeline and reports what it stores
// (target: under 20 KB a pipeline), the size of the JSON it serves and the plan it kept anyway.
func BenchmarkRecord50Jobs(b *testing.B) {
	in := fiftyJobs()
	var size int
	for b.Loop() {
		st, err := Make(in)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := json.Marshal(st)
		size = len(raw)
	}
	b.ReportMetric(float64(storedBytes(in)), "stored-B/pipeline")
	b.ReportMetric(float64(size), "record-JSON-B")
	b.ReportMetric(float64(len(in.Rec.Pipeline.Plan)), "plan-B(kept-anyway)")
}

// TestRecordStorageUnderTarget keeps the benchmark's storage figure honest in every CI run.
func TestRecordStorageUnderTarget(t *testing.T) {
	in := fiftyJobs()
	if n := storedBytes(in); n >= 20*1024 {
		t.Fatalf("the record stores %d bytes for a 50-job pipeline, target < 20 KB", n)
	}
	start := time.Now()
	st, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Predicate.RunDetails.Byproducts) != 51 || len(st.Predicate.BuildDefinition.ResolvedDependencies) != 1+50+4 {
		t.Fatalf("byproducts %d, dependencies %d", len(st.Predicate.RunDetails.Byproducts), len(st.Predicate.BuildDefinition.ResolvedDependencies))
	}
	t.Logf("made in %v", time.Since(start))
}
