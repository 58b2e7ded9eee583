package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/imagebuild"
	"github.com/nimbus-build/nimbus/agent/imagebuild/imagebuildtest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// imageWorld is a Docker harness with a registry of its own and a repo namespace in it.
type imageWorld struct {
	*harness
	registry string // host:port
	slug     string // the repo's lower-case slug
	leases   int
}

func newImageWorld(t *testing.T) *imageWorld {
	t.Helper()
	h := newHarness(t, executor.ModeDocker)
	w := &imageWorld{harness: h, registry: imagebuildtest.StartRegistry(t), slug: fmt.Sprintf("acme/r%d", time.Now().UnixNano())}
	t.Cleanup(w.removeImages)
	return w
}

// repository is where the world's environment images go.
func (w *imageWorld) repository() string { return w.registry + "/" + w.slug + "/nimbus-cache" }

// lease is a lease of p that clones url at commit, with the built-ins that name the registry.
func (w *imageWorld) lease(p protocol.Plan, url, commit string) protocol.Lease {
	w.leases++
	p.Git.Enable = true
	p.Builtins["CNB_DOCKER_REGISTRY"] = w.registry
	p.Builtins["CNB_REPO_SLUG_LOWERCASE"] = w.slug
	p.Builtins["CNB_TOKEN_USER_NAME"] = "cnb"
	l := lease(fmt.Sprintf("img-%d", w.leases), p)
	l.CloneURL, l.Commit, l.JobToken = url, commit, fmt.Sprintf("job-token-img-%d", w.leases)
	return l
}

// tags lists the registry's tags of the world's environment images.
func (w *imageWorld) tags(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get("http://" + w.registry + "/v2/" + w.slug + "/nimbus-cache/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Tags []string }
	json.NewDecoder(resp.Body).Decode(&list)
	return list.Tags
}

func (w *imageWorld) removeImages() {
	list, err := w.docker.ImageList(context.Background(), image.ListOptions{})
	if err != nil {
		return
	}
	for _, im := range list {
		for _, tag := range im.RepoTags {
			if strings.HasPrefix(tag, w.repository()+":") {
				w.docker.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
			}
		}
	}
}

var imageRef = regexp.MustCompile(`\S+/nimbus-cache:[0-9a-f]{40}`)

// refIn is the environment image a log names.
func refIn(t *testing.T, log string) string {
	t.Helper()
	ref := imageRef.FindString(log)
	if ref == "" {
		t.Fatalf("no image named in the log:\n%s", log)
	}
	return ref
}

func mustContain(t *testing.T, what, log string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, log)
		}
	}
}

// docker.build end to end on the runner: the first run builds (output in the first job's log)
// and pushes before the stages (sync); the second reuses the engine's copy; after the image is
// removed from the engine, as on a fresh agent, the third pulls it; the jobs run in the image;
// a changed versioned file builds again.
func TestDockerBuildBuildsOnceThenReuses(t *testing.T) {
	w := newImageWorld(t)
	files := map[string]string{
		"env/Dockerfile": "FROM " + w.image + "\nARG FLAVOUR\nCOPY env/deps /deps\nRUN echo building-the-env && echo \"$FLAVOUR $(cat /deps/v.txt)\" > /env.txt\n",
		"env/deps/v.txt": "deps-v1",
		"unrelated.txt":  "not in the build",
	}
	url, commit := w.srv.NewRepo(t, "acme/env", files)
	p := plan(serial("s", script("use", "cat /env.txt; test ! -e /deps/unrelated.txt")))
	p.Build = &protocol.DockerBuild{Dockerfile: "env/Dockerfile", By: []string{"env/deps"},
		BuildArgs: map[string]string{"FLAVOUR": "gpu"}, Sync: true}

	res, rec := w.run(t, w.lease(p, url, commit))
	log := logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess {
		t.Fatalf("first run %+v:\n%s", res, log)
	}
	mustContain(t, "the first run's log", log, "docker.build: ", "not in the registry: building it", "Step 1/4",
		"building-the-env", "built in", "pushing", "(sync)", "pushed", "docker.build: the jobs run in", "gpu deps-v1\n")
	ref := refIn(t, log)
	if got := w.tags(t); len(got) != 1 || !strings.HasSuffix(ref, ":"+got[0]) {
		t.Fatalf("registry tags %v, image %s", got, ref)
	}

	res, rec = w.run(t, w.lease(p, url, commit))
	log = logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess || strings.Contains(log, "Step 1/4") || strings.Contains(log, "pushing") {
		t.Fatalf("second run %+v:\n%s", res, log)
	}
	mustContain(t, "the second run's log", log, ref+": found on this engine, reused (nothing built)", "gpu deps-v1\n")

	if _, err := w.docker.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	res, rec = w.run(t, w.lease(p, url, commit))
	log = logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess || strings.Contains(log, "Step 1/4") {
		t.Fatalf("third run %+v:\n%s", res, log)
	}
	mustContain(t, "the third run's log", log, ref+": pulled from the registry in", "gpu deps-v1\n")

	files["env/deps/v.txt"] = "deps-v2"
	url2, commit2 := w.srv.NewRepo(t, "acme/env2", files)
	res, rec = w.run(t, w.lease(p, url2, commit2))
	log = logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess || refIn(t, log) == ref {
		t.Fatalf("changed run %+v:\n%s", res, log)
	}
	mustContain(t, "the changed run's log", log, "building it", "gpu deps-v2\n")
}

// Without sync the push runs beside the stages, and the run waits for it before it reports its
// end: the registry has the image once the pipeline is over.
func TestDockerBuildPushesInTheBackgroundBeforeTheFinish(t *testing.T) {
	w := newImageWorld(t)
	url, commit := w.srv.NewRepo(t, "acme/async", map[string]string{
		"Dockerfile": "FROM " + w.image + "\nRUN head -c 3000000 /dev/urandom > /blob\n"})
	p := plan(serial("s", script("use", "test -s /blob && echo in-the-image")))
	p.Build = &protocol.DockerBuild{Dockerfile: "Dockerfile"}
	res, rec := w.run(t, w.lease(p, url, commit))
	log := logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess {
		t.Fatalf("%+v:\n%s", res, log)
	}
	mustContain(t, "the log", log, "in the background", "in-the-image")
	if got := w.tags(t); len(got) != 1 || !strings.HasSuffix(refIn(t, log), ":"+got[0]) {
		t.Fatalf("the registry has %v after the finish", got)
	}
}

// A failing build fails the first job with the build's error and runs nothing of the stages.
func TestDockerBuildFailureFailsThePipeline(t *testing.T) {
	w := newImageWorld(t)
	url, commit := w.srv.NewRepo(t, "acme/broken", map[string]string{
		"Dockerfile": "FROM " + w.image + "\nRUN echo compiling-deps && exit 7\n"})
	p := plan(serial("s", script("never", "echo must-not-run")), serial("t", script("later", "echo must-not-run")))
	p.Build = &protocol.DockerBuild{Dockerfile: "Dockerfile"}
	res, rec := w.run(t, w.lease(p, url, commit))
	log := logOf(rec, jobID(0, 0))
	if res.Status != StatusFailed || !strings.Contains(res.Reason, "returned a non-zero code: 7") {
		t.Fatalf("result %+v:\n%s", res, log)
	}
	mustContain(t, "the first job's log", log, "compiling-deps", "docker.build: build: The command")
	if st, _ := status(t, rec, jobID(0, 0)); st != StatusFailed || strings.Contains(log, "must-not-run") {
		t.Fatalf("first job %s:\n%s", st, log)
	}
	if len(rec.EventsOf(protocol.EventJobStarted, jobID(1, 0))) != 0 {
		t.Fatal("a later stage ran after a failed docker.build")
	}
	if got := w.tags(t); len(got) != 0 {
		t.Fatalf("a failed build was pushed: %v", got)
	}
}

// docker:cache builds an image from its options (run-time variables expanded), exports its
// name, and a later job runs in it; its background push is done when the pipeline finishes.
func TestDockerCacheExportsTheImageForLaterJobs(t *testing.T) {
	w := newImageWorld(t)
	url, commit := w.srv.NewRepo(t, "acme/cache", map[string]string{
		"deps.Dockerfile": "FROM " + w.image + "\nARG PINNED\nCOPY lock.txt /lock.txt\nRUN echo \"pinned=$PINNED\" > /pinned.txt\n",
		"lock.txt":        "numpy==2\n",
		// optionsFrom: a file of the repo gives two options, the job's own buildArgs join them
		// and its dockerfile wins over the file's.
		"ci/cache.yml": "dockerfile: missing.Dockerfile\nby: [lock.txt]\n"})
	setter := script("set", `echo "##[set-output v=1.26]"`)
	setter.Exports = map[string]string{"v": "PIN"}
	cache := protocol.Job{Key: "cache", Name: "cache", Kind: protocol.KindBuiltin, Type: "docker:cache",
		Options:     map[string]any{"dockerfile": "deps.Dockerfile", "buildArgs": map[string]any{"PINNED": "${PIN}"}},
		OptionsFrom: []string{"./ci/cache.yml"},
		Exports:     map[string]string{"name": "DEPS_IMAGE"}, RuntimeVars: []string{"PIN"}}
	use := script("use", `cat /pinned.txt /lock.txt; echo "image=$DEPS_IMAGE"`)
	use.Image = &protocol.Image{Name: "${DEPS_IMAGE}"}
	use.RuntimeVars = []string{"DEPS_IMAGE"}
	p := plan(serial("prepare", setter, cache), serial("use", use))

	res, rec := w.run(t, w.lease(p, url, commit))
	cacheLog, useLog := logOf(rec, jobID(0, 1)), logOf(rec, jobID(1, 0))
	if res.Status != StatusSuccess {
		t.Fatalf("%+v\ncache:\n%s\nuse:\n%s", res, cacheLog, useLog)
	}
	ref := refIn(t, cacheLog)
	mustContain(t, "docker:cache's log", cacheLog, "docker:cache: ", "building it", "in the background")
	if got := rec.JobFinished(t, jobID(0, 1)).Exports["DEPS_IMAGE"]; got != ref {
		t.Fatalf("exported %q, want %q", got, ref)
	}
	mustContain(t, "the later job's log", useLog, "pinned=1.26\nnumpy==2\nimage="+ref+"\n")
	if got := w.tags(t); len(got) != 1 || !strings.HasSuffix(ref, ":"+got[0]) {
		t.Fatalf("registry tags %v after the finish", got)
	}

	// The same options again: reused, and the name is the same.
	res, rec = w.run(t, w.lease(p, url, commit))
	if cacheLog = logOf(rec, jobID(0, 1)); res.Status != StatusSuccess || !strings.Contains(cacheLog, ref+": found on this engine") {
		t.Fatalf("second run %+v:\n%s", res, cacheLog)
	}
}

// Bad options fail the task with a message that says which.
func TestDockerCacheRefusesBadOptions(t *testing.T) {
	w := newImageWorld(t)
	url, commit := w.srv.NewRepo(t, "acme/opts", map[string]string{"Dockerfile": "FROM " + w.image + "\n"})
	job := func(key string, opts map[string]any, from ...string) protocol.Job {
		return protocol.Job{Key: key, Name: key, Kind: protocol.KindBuiltin, Type: "docker:cache", Options: opts, OptionsFrom: from, AllowFailure: true}
	}
	p := plan(serial("s",
		job("nofile", map[string]any{"by": "x"}),
		job("from", map[string]any{"dockerfile": "Dockerfile"}, "opts.json"),
		job("escape", map[string]any{"dockerfile": "../../etc/passwd"}),
		job("sync", map[string]any{"dockerfile": "Dockerfile", "sync": "maybe"})))
	_, rec := w.run(t, w.lease(p, url, commit))
	for i, want := range []string{"the option dockerfile is required", "optionsFrom: opts.json: no such file in the workspace", "and stay inside it", "option sync: want true or false"} {
		if st, _ := status(t, rec, jobID(0, i)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, i)), want) {
			t.Errorf("job %d: %s %q, want %q", i, st, logOf(rec, jobID(0, i)), want)
		}
	}
}

// The shell executor has no engine to build on: docker.build fails the pipeline, docker:cache
// its job, both saying so.
func TestShellCannotBuildImages(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	p := plan(serial("s", script("never", "echo must-not-run")))
	p.Build = &protocol.DockerBuild{Dockerfile: "Dockerfile"}
	res, rec := h.run(t, lease("shell-build", p))
	if res.Status != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), "docker.build is not supported by the shell executor") {
		t.Fatalf("docker.build: %+v %q", res, logOf(rec, jobID(0, 0)))
	}
	cache := protocol.Job{Key: "c", Name: "c", Kind: protocol.KindBuiltin, Type: "docker:cache", Options: map[string]any{"dockerfile": "Dockerfile"}}
	res, rec = h.run(t, lease("shell-cache", plan(serial("s", cache))))
	if res.Status != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), "Docker executor") {
		t.Fatalf("docker:cache: %+v %q", res, logOf(rec, jobID(0, 0)))
	}
}

func TestCacheOptions(t *testing.T) {
	env := map[string]string{"V": "3.12", "S": "true", "DIR": "docker"}
	job := protocol.Job{Options: map[string]any{
		"dockerfile": "${DIR}/Dockerfile", "target": "dev", "by": "deps", "versionBy": []any{"deps", "lock"},
		"buildArgs": map[string]any{"PY": "${V}", "N": float64(3), "ON": true}, "sync": "${S}",
		"ignoreBuildArgsInVersion": true}, RuntimeVars: []string{"V", "S", "DIR"}}
	w := (&run{}).openLog(0) // a log of no job: discarded
	spec, sync, err := cacheOptions(job, env, w)
	if err != nil {
		t.Fatal(err)
	}
	want := imagebuild.Spec{Dockerfile: "docker/Dockerfile", Target: "dev", By: []string{"deps"}, VersionBy: []string{"deps", "lock"},
		BuildArgs: map[string]string{"PY": "3.12", "N": "3", "ON": "true"}, IgnoreBuildArgsInVersion: true}
	if !reflect.DeepEqual(spec, want) || !sync {
		t.Fatalf("spec %+v sync %v\nwant %+v", spec, sync, want)
	}
	for opts, msg := range map[string]map[string]any{
		"by: want a list":       {"dockerfile": "D", "by": map[string]any{}},
		"buildArgs: want a map": {"dockerfile": "D", "buildArgs": "x"},
		"required":              {"target": "x"},
	} {
		if _, _, err := cacheOptions(protocol.Job{Options: msg}, env, w); err == nil || !strings.Contains(err.Error(), strings.SplitN(opts, ":", 2)[0]) {
			t.Errorf("%v: %v", msg, err)
		}
	}
}

// What the planner and `nimbus plan --explain` take the agent to run, it runs.
func TestEveryAgentBuiltinIsImplemented(t *testing.T) {
	x := &run{}
	for _, typ := range protocol.AgentBuiltins() {
		if x.builtin(typ) == nil {
			t.Errorf("protocol.AgentBuiltins lists %q, which the runner does not run", typ)
		}
	}
	if x.builtin("git:issue-update") != nil {
		t.Error("a built-in the agent does not list is run")
	}
}
