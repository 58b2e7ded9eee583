package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/e2e/testenv"
)

// Issue 17's hand-off, with the shipped example as it is: examples/train-cpu-gpu pushed to a
// repo, its two pipelines on two real agents (a CPU host, and a GPU host whose one GPU is
// simulated: no GPU here), each in its own work dir. Every job finds the nimbus CLI the agent
// mounts; the data crosses from the CPU pipeline to the GPU one and the checkpoint back through
// the build's own artifact version, in the order cnb:resolve / cnb:await give. The build page's
// awaited time is there for both, and the packaged model holds the weights the GPU trained.
func TestTrainCPUGPUHandoff(t *testing.T) {
	// The example names no image: its pipelines run the platform's default build image, here
	// the test image (the real cnbcool/default-build-env cannot be pulled).
	w := newWorld(t, "NIMBUS_DEFAULT_BUILD_IMAGE="+testenv.Image(t))
	w.agent("", "NIMBUS_AGENT_NETWORK=host", "NIMBUS_AGENT_CPUS=8")
	w.agent("", "NIMBUS_AGENT_NETWORK=host", "NIMBUS_AGENT_TAGS=cnb:arch:amd64:gpu", "NIMBUS_AGENT_CPUS=16", "NIMBUS_AGENT_GPUS=simulate:1:L40")
	w.alice.must(201, "POST", "/api/v1/admin/orgs/ml/credits", map[string]string{"amount": "100", "note": "gpu money"}, nil)

	files := map[string]string{}
	root := filepath.Join("..", "examples", "train-cpu-gpu")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[rel] = string(raw)
		return err
	})
	if err != nil || files[".cnb.yml"] == "" {
		t.Fatalf("the example: %v (%d files)", err, len(files))
	}
	n := w.pushFiles(files)
	b := w.waitBuildSuccess(n, 3*time.Minute)

	trained := regexp.MustCompile(`best\.pt ([0-9a-f]{64})`).FindStringSubmatch(w.jobLogIn(b, "train-gpu", "train"))
	if trained == nil {
		t.Fatalf("train did not report its weights:\n%s", w.jobLogIn(b, "train-gpu", "train"))
	}
	if log := w.jobLogIn(b, "train-gpu", "train"); !regexp.MustCompile(`train: GPU [^nv]`).MatchString(log) {
		t.Errorf("train did not get its GPU:\n%s", log)
	}
	if log := w.jobLogIn(b, "train-gpu", "eval-and-pack"); !strings.Contains(log, `"model": "`+trained[1]+`"`) {
		t.Errorf("evaluate did not see the trained model:\n%s", log)
	}
	if log := w.jobLogIn(b, "train-cpu", "prepare"); !strings.Contains(log, "preprocess: 5 samples") {
		t.Errorf("prepare:\n%s", log)
	}

	// The awaits took time, shown apart.
	var raw struct {
		Pipelines []struct {
			ID        int64  `json:"id"`
			Name      string `json:"name"`
			AwaitedMs *int64 `json:"awaited_ms"`
		} `json:"pipelines"`
	}
	w.api.must(200, "GET", "/api/v1/repos/ml/trainer/builds/"+itoa(n), nil, &raw)
	for _, p := range raw.Pipelines {
		if p.AwaitedMs == nil || *p.AwaitedMs <= 0 {
			t.Errorf("pipeline %s shows no awaited time: %v", p.Name, p.AwaitedMs)
		}
	}

	// What the record is built from: the images by digest and the hosts, as the agents saw them.
	var seen struct {
		Pipelines []struct {
			Name string `json:"name"`
			Host struct {
				AgentID string `json:"agentId"`
				Host    struct {
					GPUDriver string `json:"gpuDriver"`
					Kernel    string `json:"kernel"`
				} `json:"host"`
			} `json:"host"`
			Stages []struct {
				Jobs []struct {
					Name        string `json:"name"`
					Type        string `json:"type"`
					Image       string `json:"image"`
					ImageDigest string `json:"image_digest"`
				} `json:"jobs"`
			} `json:"stages"`
		} `json:"pipelines"`
	}
	w.api.must(200, "GET", "/api/v1/repos/ml/trainer/builds/"+itoa(n), nil, &seen)
	for _, p := range seen.Pipelines {
		wantDriver := map[string]string{"train-gpu": "simulated", "train-cpu": ""}[p.Name]
		if p.Host.AgentID == "" || p.Host.Host.Kernel == "" || p.Host.Host.GPUDriver != wantDriver {
			t.Errorf("pipeline %s host %+v", p.Name, p.Host)
		}
		for _, st := range p.Stages {
			for _, j := range st.Jobs {
				script := j.Type == ""
				if script != (j.Image == testenv.Image(t) && strings.HasPrefix(j.ImageDigest, "sha256:")) {
					t.Errorf("job %s/%s (type %q) ran image %q at %q", p.Name, j.Name, j.Type, j.Image, j.ImageDigest)
				}
			}
		}
	}

	// What each pipeline moved, as the server saw it.
	moved := map[string]string{"train-cpu": "push data, push model, pull ckpt", "train-gpu": "push ckpt, pull data"}
	for _, p := range raw.Pipelines {
		var uses struct {
			Pushed, Pulled []struct{ Package, Digest string }
		}
		w.api.must(200, "GET", "/api/v1/repos/ml/trainer/pipelines/"+itoa(p.ID)+"/artifacts", nil, &uses)
		var got []string
		for _, u := range uses.Pushed {
			got = append(got, "push "+u.Package)
		}
		for _, u := range uses.Pulled {
			got = append(got, "pull "+u.Package)
		}
		if strings.Join(got, ", ") != moved[p.Name] {
			t.Errorf("pipeline %s moved %v, want %s", p.Name, got, moved[p.Name])
		}
	}

	// The hand-off versions are the build's; the packaged model is a plain version, latest.
	for _, pkg := range []string{"data", "ckpt"} {
		var v struct {
			Files []struct{ Name string }
		}
		var list struct {
			Items []struct {
				Version     string `json:"version"`
				BuildScoped bool   `json:"build_scoped"`
			} `json:"items"`
		}
		w.alice.must(200, "GET", "/api/v1/repos/ml/trainer/artifacts/"+pkg, nil, &list)
		if len(list.Items) != 1 || !list.Items[0].BuildScoped || !strings.HasPrefix(list.Items[0].Version, "nimbus-") {
			t.Fatalf("%s versions: %+v", pkg, list.Items)
		}
		w.alice.must(200, "GET", "/api/v1/repos/ml/trainer/artifacts/"+pkg+"/"+list.Items[0].Version, nil, &v)
		if len(v.Files) != 1 {
			t.Errorf("%s: %+v", pkg, v)
		}
	}
	var model struct {
		Version string `json:"version"`
		Build   *struct {
			Number int64 `json:"number"`
		} `json:"build"`
	}
	w.alice.must(200, "GET", "/api/v1/repos/ml/trainer/artifacts/model/latest", nil, &model)
	if model.Version != b.Commit || model.Build == nil || model.Build.Number != n {
		t.Fatalf("the packaged model: %+v, want version %s of build #%d", model, b.Commit, n)
	}
	if log := w.jobLogIn(b, "train-cpu", "package"); !strings.Contains(log, "package: model sha256") {
		t.Errorf("package:\n%s", log)
	}
}
