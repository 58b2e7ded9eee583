package record

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

const (
	commitA = "1111111111111111111111111111111111111111"
	imgA    = "sha256:aaaa"
	imgB    = "sha256:bbbb"
	dataSHA = "sha256:dddd"
	modelSH = "sha256:eeee"
)

func at(sec int) *time.Time {
	t := time.Date(2026, 12, 3, 6, 0, sec, 0, time.UTC)
	return &t
}

func ptr[T any](v T) *T { return &v }

// sample is a GPU pipeline of build #7 (id 70): two stages, an await and a training job, as the
// build side keeps it, and what it moved.
func sample() Inputs {
	plan := protocol.Plan{
		Key: "pipeline-1", Name: "train-gpu", Event: "push", Ref: "main",
		Runner:   protocol.Runner{Class: "cnb:arch:amd64:gpu", Tags: []string{"cnb:arch:amd64:gpu"}, Cpus: 16, MemoryGiB: 64, GPU: "L40", GPUMemoryGB: 48},
		Image:    &protocol.Image{Name: "registry.example/ml/base:1", User: "bot", Password: "hunter2"},
		Builtins: map[string]string{"CNB_BRANCH": "main", "CNB_COMMIT": commitA, "CNB_IS_RETRY": "false"},
		Env:      map[string]string{"EPOCHS": "10"},
		Imports:  []string{"https://nimbus.example/ml/secrets/-/blob/main/env.yml"},
		Stages: []protocol.Stage{
			{Name: "wait", Jobs: []protocol.Job{{Key: "job-0", Name: "wait", Kind: protocol.KindBuiltin, Type: "cnb:await"}}},
			{Name: "train", Jobs: []protocol.Job{{Key: "job-0", Name: "train", Kind: protocol.KindScript, Script: "sh train.sh", Env: map[string]string{"EPOCHS": "10"}}}},
		},
	}
	raw, _ := json.Marshal(plan)
	rec := &build.Recorded{
		Build: build.Build{ID: 70, Number: 7, Event: "push", Branch: "main", CommitSHA: commitA},
		Pipeline: build.Pipeline{ID: 700, BuildID: 70, Position: 1, Name: "train-gpu", Status: build.StatusSuccess,
			StartedAt: at(0), FinishedAt: at(30), Plan: string(raw), SecretNames: `["HF_TOKEN"]`,
			Host: `{"agentId":"agt_1","name":"gpu-1","version":"1.4.0","executor":"docker","gpus":[{"index":0,"name":"NVIDIA L40","memoryMiB":46068}],` +
				`"host":{"os":"linux/amd64","kernel":"6.1.0","cpuModel":"AMD EPYC","gpuDriver":"550.54.15","cudaVersion":"12.4","engine":"26.1"}}`},
		Plan: plan,
		Stages: []build.Stage{
			{ID: 1, PipelineID: 700, Position: 0, Name: "wait", Status: build.StatusSuccess},
			{ID: 2, PipelineID: 700, Position: 1, Name: "train", Status: build.StatusSuccess},
		},
		Jobs: []build.Job{
			{ID: 10, StageID: 1, PipelineID: 700, Position: 0, Name: "wait", Type: "cnb:await", Status: build.StatusSuccess, StartedAt: at(1), FinishedAt: at(11)},
			{ID: 11, StageID: 2, PipelineID: 700, Position: 0, Name: "train", Status: build.StatusSuccess, ExitCode: ptr(0),
				StartedAt: at(12), FinishedAt: at(29), Image: "registry.example/ml/base:1", ImageDigest: "registry.example/ml/base@" + imgA},
		},
		TriggeredBy: "alice",
	}
	return Inputs{PublicURL: "https://nimbus.example", Org: "ml", Repo: "trainer", Rec: rec,
		Pulled: []Moved{{Repo: "ml/trainer", Package: "data", Version: "nimbus-70", File: "processed.tgz", Digest: dataSHA, Size: 10, BuildScoped: true}},
		Pushed: []Moved{{Repo: "ml/trainer", Package: "model", Version: commitA, File: "model.tgz", Digest: modelSH, Size: 20}},
	}
}

func mustMake(t *testing.T, in Inputs) *Statement {
	t.Helper()
	st, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMakeNamesWhatRan(t *testing.T) {
	st := mustMake(t, sample())
	raw, _ := json.Marshal(st)
	text := string(raw)

	if st.Type != StatementType || st.PredicateType != PredicateType {
		t.Errorf("types %q %q", st.Type, st.PredicateType)
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != "eeee" || st.Subject[0].Name != "ml/trainer/model/"+commitA+"/model.tgz" {
		t.Errorf("subject %+v", st.Subject)
	}
	deps := st.Predicate.BuildDefinition.ResolvedDependencies
	if len(deps) != 3 || deps[0].Digest["gitCommit"] != commitA || deps[0].URI != "git+https://nimbus.example/ml/trainer.git@refs/heads/main" {
		t.Fatalf("dependencies %+v", deps)
	}
	if deps[1].Digest["sha256"] != "aaaa" || deps[1].Annotations["ref"] != "registry.example/ml/base@"+imgA ||
		strings.Join(deps[1].Annotations["jobs"].([]string), ",") != "1.0 train / train" {
		t.Errorf("image %+v", deps[1])
	}
	if deps[2].Digest["sha256"] != "dddd" || deps[2].Annotations["buildScoped"] != true {
		t.Errorf("pulled file %+v", deps[2])
	}
	in := st.Predicate.BuildDefinition.InternalParameters
	env := in.Env
	if env["EPOCHS"] != "10" || env["CNB_COMMIT"] != commitA || env["CNB_BUILD_ID"] != "nimbus-70" || env["CNB_PIPELINE_ID"] != "700" ||
		env["CNB_BUILD_WEB_URL"] != "https://nimbus.example/ml/trainer/builds/7" || env["HF_TOKEN"] != "***" {
		t.Errorf("env %v", env)
	}
	if _, ok := env["CNB_TOKEN"]; ok {
		t.Errorf("CNB_TOKEN has a value in the env")
	}
	if strings.Join(in.Secrets, ",") != "CNB_TOKEN,HF_TOKEN" || len(in.Imports) != 1 || in.Runner.GPU != "L40" || in.TriggeredBy != "alice" {
		t.Errorf("internal %+v", in)
	}
	if strings.Contains(text, "hunter2") || strings.Contains(text, `"bot"`) {
		t.Errorf("registry credentials in the record: %s", text)
	}
	if strings.Contains(string(st.Predicate.BuildDefinition.ExternalParameters.Plan), "CNB_IS_RETRY") {
		t.Errorf("the built-ins are in the plan")
	}
	b := st.Predicate.RunDetails.Builder
	if b.ID != "https://nimbus.example/agents/agt_1" || b.Version["nvidia-driver"] != "550.54.15" || b.Version["cuda"] != "12.4" ||
		b.Version["cpu-model"] != "AMD EPYC" || b.Version["nimbus-agent"] != "1.4.0" || len(b.BuilderDependencies) != 1 ||
		b.BuilderDependencies[0].Annotations["model"] != "NVIDIA L40" {
		t.Errorf("builder %+v", b)
	}
	bp := st.Predicate.RunDetails.Byproducts
	if len(bp) != 3 || bp[0].Annotations["durationMs"] != int64(30000) || bp[2].Name != "1.0 train / train" ||
		bp[2].Annotations["exitCode"] != 0 || bp[2].Annotations["durationMs"] != int64(17000) || bp[1].Annotations["type"] != "cnb:await" {
		t.Errorf("byproducts %+v", bp)
	}
}

// rerunOf is the sample as an exact re-run records it: another build, pipeline and agent lease
// time, the image pinned by digest, the hand-off under the new build's version, other timings.
func rerunOf(in Inputs) Inputs {
	r := *in.Rec
	r.Build.ID, r.Build.Number = 71, 8
	r.Pipeline.ID, r.Pipeline.StartedAt, r.Pipeline.FinishedAt = 710, at(40), at(75)
	r.Plan.Builtins = map[string]string{"CNB_BRANCH": "main", "CNB_COMMIT": commitA, "CNB_IS_RETRY": "true"}
	r.Plan.Stages = []protocol.Stage{r.Plan.Stages[0], r.Plan.Stages[1]}
	train := r.Plan.Stages[1].Jobs[0]
	train.Image = &protocol.Image{Name: "registry.example/ml/base@" + imgA}
	r.Plan.Stages[1].Jobs = []protocol.Job{train}
	raw, _ := json.Marshal(r.Plan)
	r.Pipeline.Plan = string(raw)
	r.Jobs = []build.Job{r.Jobs[0], r.Jobs[1]}
	r.Jobs[0].StartedAt, r.Jobs[0].FinishedAt = at(41), at(50)
	r.Jobs[1].StartedAt, r.Jobs[1].FinishedAt = at(51), at(74)
	r.Jobs[1].Image = "registry.example/ml/base@" + imgA
	out := in
	out.Rec = &r
	out.Pulled = []Moved{{Repo: "ml/trainer", Package: "data", Version: "nimbus-71", File: "processed.tgz", Digest: dataSHA, Size: 10, BuildScoped: true}}
	return out
}

func TestCompareExactRerunDiffersOnlyInTimings(t *testing.T) {
	a := mustMake(t, sample())
	b := mustMake(t, rerunOf(sample()))
	d, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Differences) != 0 {
		t.Errorf("differences %+v", d.Differences)
	}
	if len(d.Timings) != 3 || d.Timings[2].Key != "pipeline" || *d.Timings[2].A != 30000 || *d.Timings[2].B != 35000 {
		t.Errorf("timings %+v", d.Timings)
	}
	// Read back from JSON, as a client or a stored record would give it, it compares the same.
	raw, _ := json.Marshal(a)
	var back Statement
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if d, _ := Compare(&back, a); len(d.Differences) != 0 {
		t.Errorf("a record read back differs from itself: %+v", d.Differences)
	}
}

func TestCompareFindsWhatChanged(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    func(in *Inputs)
		category  string
		key, a, b string
	}{
		{"commit", func(in *Inputs) { in.Rec.Build.CommitSHA = "2222" }, "commit", "commit", commitA, "2222"},
		{"image digest", func(in *Inputs) { in.Rec.Jobs[1].ImageDigest = "registry.example/ml/base@" + imgB }, "image", "1.0 train / train", imgA, imgB},
		{"pipeline env", func(in *Inputs) { in.Rec.Plan.Env = map[string]string{"EPOCHS": "20"} }, "env", "EPOCHS", "10", "20"},
		{"job env in the plan", func(in *Inputs) { in.Rec.Plan.Stages[1].Jobs[0].Env = map[string]string{"EPOCHS": "20"} },
			"plan", "stages[1].jobs[0].env.EPOCHS", `"10"`, `"20"`},
		{"GPU driver", func(in *Inputs) {
			in.Rec.Pipeline.Host = strings.Replace(in.Rec.Pipeline.Host, "550.54.15", "560.28.03", 1)
		}, "host", "nvidia-driver", "550.54.15", "560.28.03"},
		{"input data", func(in *Inputs) { in.Pulled[0].Digest = "sha256:ffff" }, "input", "ml/trainer/data/$CNB_BUILD_ID/processed.tgz", "dddd", "ffff"},
		{"output model", func(in *Inputs) { in.Pushed[0].Digest = "sha256:9999" }, "output", "ml/trainer/model/" + commitA + "/model.tgz", "eeee", "9999"},
		{"exit code", func(in *Inputs) { in.Rec.Jobs[1].ExitCode = ptr(3) }, "outcome", "1.0 train / train exit code", "0", "3"},
		{"secret names", func(in *Inputs) { in.Rec.Pipeline.SecretNames = `["HF_TOKEN","WANDB_KEY"]` }, "env", "WANDB_KEY", "", "***"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := rerunOf(sample())
			rec := *b.Rec
			rec.Jobs = append([]build.Job(nil), rec.Jobs...)
			b.Rec = &rec
			b.Pulled = append([]Moved(nil), b.Pulled...)
			b.Pushed = append([]Moved(nil), b.Pushed...)
			tc.change(&b)
			d, err := Compare(mustMake(t, sample()), mustMake(t, b))
			if err != nil {
				t.Fatal(err)
			}
			var found *Difference
			for i := range d.Differences {
				if x := &d.Differences[i]; x.Category == tc.category && x.Key == tc.key {
					found = x
				}
			}
			str := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			if found == nil || str(found.A) != tc.a && !strings.HasSuffix(str(found.A), tc.a) || !strings.HasSuffix(str(found.B), tc.b) {
				t.Fatalf("want %s %q: %q → %q in %+v", tc.category, tc.key, tc.a, tc.b, d.Differences)
			}
		})
	}
}
