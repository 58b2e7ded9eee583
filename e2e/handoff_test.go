package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/webhook"
	"github.com/nimbus-build/nimbus/internal/testenv"
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
	// The test image under a tag of this test's own, which it moves later.
	image := "nimbus-test/handoff:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dockerCLI(t, "tag", testenv.Image(t), image)
	t.Cleanup(func() { exec.Command("docker", "-H", testenv.DockerHost(t), "rmi", "-f", image).Run() })
	imageID := dockerCLI(t, "image", "inspect", "-f", "{{.Id}}", image)
	w := newWorld(t, "NIMBUS_DEFAULT_BUILD_IMAGE="+image, "NIMBUS_PUBLISH_WEBHOOK_PRIVATE=true", "NIMBUS_PUBLISH_WEBHOOK_SETTLE=1s")
	// The inference deployment's webhook: it hears of each new model version.
	hook := &hookReceiver{}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()
	hookSet := w.alice.setPublishWebhook("ml", "trainer", hookSrv.URL+"/roll-forward")
	w.agent("", "NIMBUS_AGENT_NETWORK=host", "NIMBUS_AGENT_CPUS=8")
	w.agent("", "NIMBUS_AGENT_NETWORK=host", "NIMBUS_AGENT_TAGS=cnb:arch:amd64:gpu", "NIMBUS_AGENT_CPUS=16", "NIMBUS_AGENT_GPUS=simulate:1:L40")
	w.alice.grantCredits("ml", "100", "gpu money")

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
	raw := w.build(n)
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
				if script != (j.Image == image && j.ImageDigest == imageID) {
					t.Errorf("job %s/%s (type %q) ran image %q at %q", p.Name, j.Name, j.Type, j.Image, j.ImageDigest)
				}
			}
		}
	}

	// What each pipeline moved, as the server saw it.
	moved := map[string]string{"train-cpu": "push data, push model, pull ckpt", "train-gpu": "push ckpt, pull data"}
	digests := map[string]string{} // package → digest of its file, as the server saw it pushed
	for _, p := range raw.Pipelines {
		uses := w.api.pipelineArtifacts("ml", "trainer", p.ID)
		var got []string
		for _, u := range uses.Pushed {
			got = append(got, "push "+u.Package)
			digests[u.Package] = u.Digest
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
		list := w.alice.artifactVersions("ml", "trainer", pkg)
		if len(list) != 1 || !list[0].BuildScoped || !strings.HasPrefix(list[0].Version, "nimbus-") {
			t.Fatalf("%s versions: %+v", pkg, list)
		}
		v := w.alice.artifactVersion("ml", "trainer", pkg, list[0].Version)
		if len(v.Files) != 1 {
			t.Errorf("%s: %+v", pkg, v)
		}
	}
	model := w.alice.artifactVersion("ml", "trainer", "model", "latest")
	if model.Version != b.Commit || model.Build == nil || model.Build.Number != n {
		t.Fatalf("the packaged model: %+v, want version %s of build #%d", model, b.Commit, n)
	}
	if log := w.jobLogIn(b, "train-cpu", "package"); !strings.Contains(log, "package: model sha256") {
		t.Errorf("package:\n%s", log)
	}

	// The inference service downloads the model with a deploy token, and checks its digest.
	dt := w.alice.deployToken("ml", "trainer", "inference")
	if got := download(t, w.base+"/api/v1/repos/ml/trainer/artifacts/model/"+b.Commit+"/model.tgz", dt.Token); got != digests["model"] {
		t.Errorf("the deploy token downloaded %s, the pipeline pushed %s", got, digests["model"])
	}
	// And so does the official Hugging Face client, with the same token, from the HF endpoint.
	modelHex := strings.TrimPrefix(digests["model"], "sha256:")
	out := runHFClient(t, hfClient(t), w.base+"/api/v1/hf", dt.Token, "ml.trainer/model", "model.tgz", modelHex)
	var hf struct {
		OK     bool   `json:"ok"`
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &hf); err != nil || !hf.OK || hf.SHA256 != modelHex {
		t.Errorf("@huggingface/hub on the pipeline's model: %q (%v)", out, err)
	}

	// The publish webhook heard of the model (not of the hand-off versions), signed.
	deadline := time.Now().Add(30 * time.Second)
	for hook.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if hook.count() != 1 {
		t.Fatalf("the publish webhook got %d deliveries, want 1", hook.count())
	}
	var note struct {
		Package, Version, Provenance string
		Files                        []struct{ SHA256 string }
	}
	json.Unmarshal(hook.bodies[0], &note)
	if !webhook.Verify([]byte(hookSet.Secret), hook.bodies[0], hook.headers[0].Get("X-Nimbus-Signature")) ||
		note.Package != "model" || note.Version != b.Commit || len(note.Files) != 1 || note.Files[0].SHA256 != digests["model"] ||
		!strings.Contains(note.Provenance, "/pipelines/") {
		t.Errorf("the publish webhook got %s (headers %v)", hook.bodies[0], hook.headers[0])
	}

	// Each pipeline's record names the commit, its image by digest, its host (the GPU's model
	// on the GPU node) and the files in and out by digest.
	ids := map[string]int64{}
	for _, p := range raw.Pipelines {
		ids[p.Name] = p.ID
		rec := w.record(p.ID)
		bd := rec.Predicate.BuildDefinition
		if bd.ResolvedDependencies[0].Digest["gitCommit"] != b.Commit {
			t.Errorf("%s: the record's commit %v, want %s", p.Name, bd.ResolvedDependencies[0], b.Commit)
		}
		var images, pulled []string
		for _, d := range bd.ResolvedDependencies[1:] {
			if d.Annotations["package"] != nil {
				pulled = append(pulled, fmt.Sprint(d.Annotations["package"])+" "+"sha256:"+d.Digest["sha256"])
			} else {
				images = append(images, fmt.Sprint(d.Annotations["ref"]))
			}
		}
		var pushed []string
		for _, s := range rec.Subject {
			pushed = append(pushed, fmt.Sprint(s.Annotations["package"])+" "+"sha256:"+s.Digest["sha256"])
		}
		wantIn := map[string]string{"train-cpu": "ckpt " + digests["ckpt"], "train-gpu": "data " + digests["data"]}[p.Name]
		wantOut := map[string]string{"train-cpu": "data " + digests["data"] + ", model " + digests["model"], "train-gpu": "ckpt " + digests["ckpt"]}[p.Name]
		if strings.Join(images, ",") != imageID || strings.Join(pulled, ", ") != wantIn || strings.Join(pushed, ", ") != wantOut {
			t.Errorf("%s: the record's images %v, in %v (want %s), out %v (want %s)", p.Name, images, pulled, wantIn, pushed, wantOut)
		}
		gpus := rec.Predicate.RunDetails.Builder.BuilderDependencies
		if p.Name == "train-gpu" && (len(gpus) != 1 || gpus[0].Annotations["model"] != "NVIDIA L40" ||
			rec.Predicate.RunDetails.Builder.Version["nvidia-driver"] != "simulated" || bd.InternalParameters.Runner.GPU == "") {
			t.Errorf("train-gpu: the record's GPU %+v, builder %+v, runner %+v", gpus, rec.Predicate.RunDetails.Builder, bd.InternalParameters.Runner)
		}
		if env := bd.InternalParameters.Env; env["CNB_COMMIT"] != b.Commit || env["CNB_TOKEN"] != "" {
			t.Errorf("%s: the record's env %v", p.Name, env)
		}
	}

	// Re-run exactly: the same commit, plans and images; the records differ only in timings.
	again := w.rerunExactly(n)
	for name, id := range again {
		if d := w.compare(ids[name], id); len(d.Differences) != 0 || len(d.Timings) == 0 {
			t.Errorf("%s: the exact re-run differs: %+v (timings %+v)", name, d.Differences, d.Timings)
		}
	}

	// The tag moves to another image; an exact re-run still runs the one the record names.
	cid := dockerCLI(t, "create", image, "true")
	moved2 := dockerCLI(t, "commit", "--change", "LABEL moved=yes", cid)
	dockerCLI(t, "rm", cid)
	t.Cleanup(func() { exec.Command("docker", "-H", testenv.DockerHost(t), "rmi", "-f", moved2).Run() })
	dockerCLI(t, "tag", moved2, image)
	if moved2 == imageID {
		t.Fatal("the tag did not move")
	}
	for name, id := range w.rerunExactly(n) {
		d := w.compare(ids[name], id)
		if len(d.Differences) != 0 {
			t.Errorf("%s: after the tag moved, the exact re-run differs: %+v", name, d.Differences)
		}
		for _, bp := range w.record(id).Predicate.RunDetails.Byproducts {
			if img := bp.Annotations["imageDigest"]; img != nil && img != imageID {
				t.Errorf("%s: job %s ran %v after the tag moved, want %s", name, bp.Name, img, imageID)
			}
		}
	}
	// The re-runs pushed the same bytes to the same version: no new version, no new delivery.
	time.Sleep(2 * time.Second)
	if hook.count() != 1 {
		t.Errorf("the publish webhook got %d deliveries after the re-runs, want 1", hook.count())
	}
}

// hookReceiver is a publish webhook's receiver.
type hookReceiver struct {
	mu      sync.Mutex
	headers []http.Header
	bodies  [][]byte
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.headers, h.bodies = append(h.headers, r.Header.Clone()), append(h.bodies, b)
	h.mu.Unlock()
}

func (h *hookReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

// record is a pipeline's reproducibility record.
func (w *world) record(pipeline int64) apiclient.Record {
	w.t.Helper()
	rec, err := w.api.api.PipelineRecord(w.t.Context(), "ml", "trainer", pipeline)
	w.api.check("record of pipeline "+itoa(pipeline), err)
	return *rec
}

// compare is what differs between two pipelines' records.
func (w *world) compare(a, b int64) apiclient.RecordDiff {
	w.t.Helper()
	d, err := w.api.api.CompareRecords(w.t.Context(), "ml", "trainer", a, b)
	w.api.check("compare records", err)
	return *d
}

// rerunExactly re-runs build n exactly, waits for it to succeed and returns its pipelines' ids
// by name.
func (w *world) rerunExactly(n int64) map[string]int64 {
	nb := w.api.rerunExact("ml", "trainer", n)
	b := w.waitBuildSuccess(nb.Number, 3*time.Minute)
	ids := map[string]int64{}
	for _, p := range b.Pipelines {
		ids[p.Name] = p.ID
	}
	return ids
}

// dockerCLI runs the docker CLI against the test engine and returns its trimmed output.
func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"-H", testenv.DockerHost(t)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// download GETs url with a bearer token and returns the body's digest.
func download(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	h := sha256.New()
	io.Copy(h, resp.Body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
