package e2e

// docker.build and docker:cache end to end: the real server (PostgreSQL, Redis, its OCI
// registry), real nimbus-agents on the test Docker engine, pushes with the real git client
// (pushFiles, from dockerservice_test.go).

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	docker "github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// envImageCI has two pipelines: "env" runs its job in the image docker.build makes from
// .ide/Dockerfile (versioned by .ide/deps), "cache" makes an image with docker:cache and runs
// its next job in it by the exported name.
const envImageCI = `
main:
  push:
    - name: env
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker:
        build:
          dockerfile: .ide/Dockerfile
          by: [.ide/deps]
          versionBy: [.ide/deps]
      stages:
        - name: use
          script: cat /env.txt
    - name: cache
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: BASE_IMAGE }
      stages:
        - name: make
          type: docker:cache
          options:
            dockerfile: .ide/cache.Dockerfile
            sync: true
          exports:
            name: CACHE_IMAGE
        - name: use-cache
          image: ${CACHE_IMAGE}
          script: echo "cache image is $CACHE_IMAGE"; cat /cache.txt
`

// envImageFiles are the repository's files for envImageCI, with the versioned dependency file's content.
func envImageFiles(image, deps string) map[string]string {
	return map[string]string{
		".cnb.yml":              strings.ReplaceAll(envImageCI, "BASE_IMAGE", image),
		".ide/Dockerfile":       "FROM " + image + "\nCOPY .ide/deps /deps\nRUN echo building-env && echo \"env with $(cat /deps/v.txt)\" > /env.txt\n",
		".ide/deps/v.txt":       deps,
		".ide/cache.Dockerfile": "FROM " + image + "\nRUN echo made-by-docker-cache > /cache.txt\n",
	}
}

// waitBuildSuccess waits for the build to end and fails the test unless it succeeded.
func (w *world) waitBuildSuccess(n int64, within time.Duration) apiclient.Build {
	w.t.Helper()
	b := w.waitFor(n, within, "the end", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
	if b.Status != "success" {
		for _, p := range b.Pipelines {
			for _, st := range p.Stages {
				for _, j := range st.Jobs {
					w.t.Logf("pipeline %s (%s %s) job %s:\n%s", p.Name, p.Status, p.Reason, j.Name, w.jobLog(j.ID))
				}
			}
		}
		w.t.Fatalf("build #%d: %s %+v", n, b.Status, b.Error)
	}
	return b
}

// jobLogIn is the log of a job, found by the names of its pipeline and job.
func (w *world) jobLogIn(b apiclient.Build, pipeline, job string) string {
	w.t.Helper()
	for _, p := range b.Pipelines {
		for _, st := range p.Stages {
			for _, j := range st.Jobs {
				if p.Name == pipeline && j.Name == job {
					return w.jobLog(j.ID)
				}
			}
		}
	}
	w.t.Fatalf("build #%d has no job %s/%s: %+v", b.Number, pipeline, job, b)
	return ""
}

var envImageRef = regexp.MustCompile(`\S+/nimbus-cache:[0-9a-f]{40}`)

// envImageIn is the environment image a log names.
func envImageIn(t testing.TB, log string) string {
	t.Helper()
	ref := envImageRef.FindString(log)
	if ref == "" {
		t.Fatalf("no environment image named in the log:\n%s", log)
	}
	return ref
}

// envImageEngine is a client of the test Docker engine; the test removes the repo's environment
// images from it when it ends.
func (w *world) envImageEngine() *docker.Client {
	w.t.Helper()
	cli, err := docker.NewClientWithOpts(docker.WithHost(w.docker), docker.WithAPIVersionNegotiation())
	if err != nil {
		w.t.Fatal(err)
	}
	prefix := w.registryHost() + "/ml/trainer/nimbus-cache:"
	w.t.Cleanup(func() {
		defer cli.Close()
		list, err := cli.ImageList(context.Background(), image.ListOptions{})
		if err != nil {
			return
		}
		for _, im := range list {
			for _, tag := range im.RepoTags {
				if strings.HasPrefix(tag, prefix) {
					cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
				}
			}
		}
	})
	return cli
}

// envImageTags lists the tags of the repo's environment images in Nimbus's registry.
func (w *world) envImageTags(token string) []string {
	w.t.Helper()
	req, _ := http.NewRequest("GET", w.base+"/v2/ml/trainer/nimbus-cache/tags/list", nil)
	req.SetBasicAuth("alice", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Tags []string }
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&list) != nil {
		w.t.Fatalf("tags list: %d", resp.StatusCode)
	}
	return list.Tags
}

func logMustHave(t testing.TB, what, log string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(log, want) {
			t.Fatalf("%s lacks %q:\n%s", what, want, log)
		}
	}
}

// Issue 14: the first run builds the environment image and pushes it to Nimbus's registry; the
// second reuses it without building; an agent whose engine lacks it pulls it instead of
// building; a change to a versionBy file builds again. docker:cache exports the image's name
// and the next job runs in it.
func TestDockerBuildReusesTheImageAcrossRunsAndAgents(t *testing.T) {
	w := newWorld(t)
	cli := w.envImageEngine()
	readToken := w.alice.newToken("registry", "registry:read")
	first, _ := w.agent("")

	// 1. Cold: built and pushed (docker.build's push in the background, waited for before the
	// finish; docker:cache's with sync).
	b := w.waitBuildSuccess(w.pushFiles(envImageFiles(w.image, "deps-v1")), 90*time.Second)
	envLog := w.jobLogIn(b, "env", "use")
	logMustHave(t, "the first env log", envLog, "docker.build: ", "not in the registry: building it", "Step 1/3",
		"building-env", "built in", "in the background", "env with deps-v1")
	ref := envImageIn(t, envLog)
	tags := w.envImageTags(readToken)
	if !strings.Contains(strings.Join(tags, " "), ref[strings.LastIndex(ref, ":")+1:]) {
		t.Fatalf("the registry has %v, not the image %s", tags, ref)
	}
	cacheLog := w.jobLogIn(b, "cache", "make")
	logMustHave(t, "docker:cache's log", cacheLog, "docker:cache: ", "building it", "made-by-docker-cache", "(sync)", "pushed")
	cacheRef := envImageIn(t, cacheLog)
	logMustHave(t, "the job in docker:cache's image", w.jobLogIn(b, "cache", "use-cache"),
		"cache image is "+cacheRef+"\n", "made-by-docker-cache\n")

	// 2. Warm: the same Dockerfile and deps, nothing built.
	b = w.waitBuildSuccess(w.pushFiles(nil), 60*time.Second)
	envLog = w.jobLogIn(b, "env", "use")
	logMustHave(t, "the second env log", envLog, ref+": found on this engine, reused (nothing built)", "env with deps-v1")
	if strings.Contains(envLog, "Step 1/3") || strings.Contains(envLog, "building") {
		t.Fatalf("the second run built again:\n%s", envLog)
	}

	// 3. Another agent with an engine that lacks the image (removed from the shared test engine):
	// it pulls from Nimbus's registry.
	if err, _ := first.stop(t, 30*time.Second); err != nil {
		t.Fatalf("stop the first agent: %v", err)
	}
	if _, err := cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	w.agent("")
	b = w.waitBuildSuccess(w.pushFiles(nil), 60*time.Second)
	envLog = w.jobLogIn(b, "env", "use")
	logMustHave(t, "the second agent's env log", envLog, ref+": pulled from the registry in", "reused (nothing built)", "env with deps-v1")
	if strings.Contains(envLog, "Step 1/3") {
		t.Fatalf("the second agent built instead of pulling:\n%s", envLog)
	}

	// 4. A versionBy file changes: a new version, built.
	b = w.waitBuildSuccess(w.pushFiles(map[string]string{".ide/deps/v.txt": "deps-v2"}), 60*time.Second)
	envLog = w.jobLogIn(b, "env", "use")
	logMustHave(t, "the changed env log", envLog, "building it", "building-env", "env with deps-v2")
	if envImageIn(t, envLog) == ref {
		t.Fatalf("a changed versionBy file kept the version %s", ref)
	}
}
