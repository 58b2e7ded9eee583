package spec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden plan files in testdata/brief")

// The .cnb.yml examples of the two product-brief articles (copied verbatim into testdata/brief)
// plan exactly as the articles describe.
func TestBriefExamples(t *testing.T) {
	type job struct{ name, script string }
	type stage struct {
		name string
		jobs []job
	}
	type pipeline struct {
		name      string
		tags      []string
		cpus      int
		gpu       string
		workspace bool
		stages    []stage
	}
	tests := []struct {
		file string
		trig Trigger
		want []pipeline
	}{
		{
			// Two parallel pipelines on one push to main: CPU (8 cores) and GPU (16 cores).
			file: "train-main-push.yml",
			trig: Trigger{Event: "push", Branch: "main"},
			want: []pipeline{
				{name: "train-cpu", tags: []string{"cnb:arch:amd64"}, cpus: 8, stages: []stage{
					{"prepare", []job{{"prepare", "python preprocess.py --input ./data --output ./processed\n"}}},
					{"package", []job{{"package", "python package.py --model ./ckpt/best.pt --output ./dist\n"}}},
				}},
				{name: "train-gpu", tags: []string{"cnb:arch:amd64:gpu"}, cpus: 16, gpu: "any", stages: []stage{
					{"train", []job{{"train", "python train.py --data ./processed --epochs 10 --out ./ckpt\n"}}},
					{"eval-and-pack", []job{{"eval-and-pack", "python evaluate.py --model ./ckpt/best.pt --report ./report.json\n"}}},
				}},
			},
		},
		{
			// The nightly schedule on every dev/* branch.
			file: "nightly-schedule.yml",
			trig: Trigger{Event: "schedule", Branch: "dev/alice"},
			want: []pipeline{
				{name: "nightly-train", tags: []string{"cnb:arch:amd64:gpu"}, cpus: 16, gpu: "any", stages: []stage{
					{"train", []job{{"train", "python train.py --data ./dataset --epochs 20 --out ./ckpt\n"}}},
				}},
			},
		},
		{
			// A cloud IDE on a GPU node, from any branch.
			file: "vscode-gpu.yml",
			trig: Trigger{Event: "vscode", Branch: "feature/model"},
			want: []pipeline{{name: "pipeline", tags: []string{"cnb:arch:amd64:gpu"}, cpus: 16, gpu: "any", workspace: true}},
		},
		{
			file: "gpu-train.yml",
			trig: Trigger{Event: "push", Branch: "main"},
			want: []pipeline{
				{name: "gpu-train", tags: []string{"cnb:arch:amd64:gpu"}, cpus: 16, gpu: "any", stages: []stage{
					{"train", []job{{"train", "python train.py --epochs 10 --batch-size 64\n"}}},
				}},
			},
		},
		{
			// GPU validation on feature branches, on an L40 node.
			file: "feature-l40.yml",
			trig: Trigger{Event: "push", Branch: "feature/new-head"},
			want: []pipeline{
				{name: "gpu-validate", tags: []string{"cnb:arch:amd64:gpu:L40"}, cpus: 16, gpu: "L40", stages: []stage{
					{"validate", []job{{"validate", "python validate.py --model ./ckpt/best.pt\n"}}},
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "brief", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			ds := Lint(src, Options{})
			if len(ds.Problems()) != 0 {
				t.Errorf("lint: %v", ds)
			}
			// The brief's train-cpu / train-gpu share nothing: lint says they run apart.
			if info := ds.Filter(SeverityInfo); (tt.file == "train-main-push.yml") != (len(info) == 1) {
				t.Errorf("lint's advice: %v", info)
			}
			set := mustPlan(t, string(src), tt.trig, Options{})
			if len(set.Pipelines) != len(tt.want) {
				t.Fatalf("got pipelines %v", pipelineNames(set))
			}
			for i, w := range tt.want {
				p := set.Pipelines[i]
				if p.Name != w.name || !slices.Equal(p.Runner.Tags, w.tags) || p.Runner.Cpus != w.cpus || p.Runner.GPU != w.gpu || p.Workspace != w.workspace {
					t.Errorf("pipeline %d: name %q tags %v cpus %d gpu %q workspace %v", i, p.Name, p.Runner.Tags, p.Runner.Cpus, p.Runner.GPU, p.Workspace)
				}
				if p.Runner.MaxDuration.Std().Hours() != 18 || p.Runner.MemoryGiB != 2*w.cpus {
					t.Errorf("%s: cap %s memory %d GiB", p.Name, p.Runner.MaxDuration.Std(), p.Runner.MemoryGiB)
				}
				if len(p.Stages) != len(w.stages) {
					t.Fatalf("%s: stages %v", p.Name, stageNames(p))
				}
				for si, ws := range w.stages {
					s := p.Stages[si]
					if s.Name != ws.name || s.Parallel || len(s.Jobs) != len(ws.jobs) {
						t.Fatalf("%s stage %d: %+v", p.Name, si, s)
					}
					for ji, wj := range ws.jobs {
						if j := s.Jobs[ji]; j.Name != wj.name || j.Script != wj.script || j.Kind != protocol.KindScript {
							t.Errorf("%s/%s job %d: %+v", p.Name, s.Name, ji, j)
						}
					}
				}
			}
			checkGolden(t, strings.TrimSuffix(tt.file, ".yml")+".plan.json", set)
		})
	}
}

// The `nimbus plan` JSON has the shape the issue fixes.
func TestPlanJSONShape(t *testing.T) {
	src, err := os.ReadFile("testdata/brief/train-main-push.yml")
	if err != nil {
		t.Fatal(err)
	}
	set := mustPlan(t, string(src), Trigger{Event: "push", Branch: "main"}, Options{})
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Pipelines []struct {
			Name   string `json:"name"`
			Runner struct {
				Tags []string `json:"tags"`
				Cpus int      `json:"cpus"`
			} `json:"runner"`
			Stages []struct {
				Name     string `json:"name"`
				Parallel *bool  `json:"parallel"`
				Jobs     []struct {
					Name   string `json:"name"`
					Script string `json:"script"`
				} `json:"jobs"`
			} `json:"stages"`
		} `json:"pipelines"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&shape); err != nil {
		t.Fatal(err)
	}
	gpu := shape.Pipelines[1]
	if gpu.Name != "train-gpu" || gpu.Runner.Tags[0] != "cnb:arch:amd64:gpu" || gpu.Runner.Cpus != 16 {
		t.Errorf("got %+v", gpu)
	}
	st := gpu.Stages[0]
	if st.Name != "train" || st.Parallel == nil || *st.Parallel || st.Jobs[0].Name != "train" || !strings.HasPrefix(st.Jobs[0].Script, "python train.py") {
		t.Errorf("stage %+v", st)
	}
}

// checkGolden compares a plan with testdata/brief/<name>; go test -update rewrites it.
func checkGolden(t *testing.T, name string, set *protocol.PlanSet) {
	t.Helper()
	got, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "brief", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan differs from %s (go test -update rewrites it):\n%s", path, got)
	}
}
