package imagebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/agent/imagebuild/imagebuildtest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// engineWorld is the test engine, a registry of our own and a checkout.
type engineWorld struct {
	cli        *client.Client
	b          *Builder
	dir        string
	repository string
	base       string // the busybox image every Dockerfile starts FROM
}

func newEngineWorld(t *testing.T) *engineWorld {
	t.Helper()
	host, base := testenv.DockerHost(t), testenv.Image(t)
	reg := imagebuildtest.StartRegistry(t)
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	w := &engineWorld{cli: cli, b: &Builder{Engine: cli, NetworkMode: "none"}, dir: t.TempDir(), base: base,
		repository: fmt.Sprintf("%s/test/r%d/nimbus-cache", reg, time.Now().UnixNano())}
	t.Cleanup(func() { w.removeAll() })
	return w
}

func (w *engineWorld) write(t *testing.T, p, content string) {
	t.Helper()
	full := filepath.Join(w.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ensure runs Ensure and returns what the engine printed and the notes.
func (w *engineWorld) ensure(t *testing.T, ctx context.Context, s Spec) (Image, string, error) {
	t.Helper()
	var out bytes.Buffer
	img, err := w.b.Ensure(ctx, Request{Spec: s, Checkout: w.dir, Repository: w.repository,
		Auth: Auth{User: "cnb", Password: "job-token"}, CPUs: 1, MemoryBytes: 256 << 20, Out: &out,
		Note: func(f string, a ...any) { fmt.Fprintf(&out, "[note] "+f+"\n", a...) }})
	return img, out.String(), err
}

func (w *engineWorld) removeImage(t *testing.T, ref string) {
	t.Helper()
	if _, err := w.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
}

// removeAll removes every tag of the test's repository from the engine.
func (w *engineWorld) removeAll() {
	list, err := w.cli.ImageList(context.Background(), image.ListOptions{})
	if err != nil {
		return
	}
	for _, im := range list {
		for _, tag := range im.RepoTags {
			if strings.HasPrefix(tag, w.repository+":") {
				w.cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
			}
		}
	}
}

// The whole reuse order on a real engine and registry: built and pushed, then found on the
// engine, then (removed from the engine, as on a fresh agent) pulled; a change to a versioned
// file builds again.
func TestEnsureBuildsOnceThenReuses(t *testing.T) {
	w := newEngineWorld(t)
	ctx := context.Background()
	w.write(t, "Dockerfile", "FROM "+w.base+"\nARG GREETING\nCOPY deps /deps\nRUN echo \"greeting=$GREETING\" && cat /deps/a.txt\n")
	w.write(t, "deps/a.txt", "dep-a-v1\n")
	w.write(t, "unlisted.txt", "not in the context\n")
	spec := Spec{Dockerfile: "Dockerfile", By: []string{"deps"}, BuildArgs: map[string]string{"GREETING": "hi"}}

	img, out, err := w.ensure(t, ctx, spec)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if img.How != Built || img.InRegistry || img.Ref != w.repository+":"+img.Version {
		t.Fatalf("first: %+v\n%s", img, out)
	}
	for _, want := range []string{"not in the registry: building it", `  dir "deps" `, "Step 1/4", "greeting=hi", "dep-a-v1", "built in"} {
		if !strings.Contains(out, want) {
			t.Fatalf("first output lacks %q:\n%s", want, out)
		}
	}
	var push bytes.Buffer
	digest, err := w.b.Push(ctx, img.Ref, Auth{User: "cnb", Password: "job-token"}, &push)
	if err != nil || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("push: %q %v\n%s", digest, err, push.String())
	}

	again, out, err := w.ensure(t, ctx, spec)
	if err != nil || again.How != FoundLocally || !again.InRegistry || again.Ref != img.Ref {
		t.Fatalf("second: %+v %v\n%s", again, err, out)
	}
	if strings.Contains(out, "Step") || !strings.Contains(out, "found on this engine") {
		t.Fatalf("second output:\n%s", out)
	}

	w.removeImage(t, img.Ref)
	pulled, out, err := w.ensure(t, ctx, spec)
	if err != nil || pulled.How != Pulled || !pulled.InRegistry || pulled.Ref != img.Ref {
		t.Fatalf("after rmi: %+v %v\n%s", pulled, err, out)
	}
	if strings.Contains(out, "Step") || !strings.Contains(out, "pulled from the registry") {
		t.Fatalf("pull output:\n%s", out)
	}

	w.write(t, "unlisted.txt", "changed, but not versioned\n")
	if same, _, err := w.ensure(t, ctx, spec); err != nil || same.Ref != img.Ref || same.How != FoundLocally {
		t.Fatalf("an unversioned file changed the image: %+v %v", same, err)
	}
	w.write(t, "deps/a.txt", "dep-a-v2\n")
	changed, out, err := w.ensure(t, ctx, spec)
	if err != nil || changed.How != Built || changed.Ref == img.Ref || !strings.Contains(out, "dep-a-v2") {
		t.Fatalf("after a change: %+v %v\n%s", changed, err, out)
	}
}

// An image built here whose push never happened (the agent died first) is found on the engine
// but reported missing from the registry, so the caller pushes it.
func TestEnsureKnowsALocalImageIsNotInTheRegistry(t *testing.T) {
	w := newEngineWorld(t)
	ctx := context.Background()
	w.write(t, "Dockerfile", "FROM "+w.base+"\nRUN echo unpushed\n")
	spec := Spec{Dockerfile: "Dockerfile"}
	if img, out, err := w.ensure(t, ctx, spec); err != nil || img.How != Built {
		t.Fatalf("%+v %v\n%s", img, err, out)
	}
	img, out, err := w.ensure(t, ctx, spec)
	if err != nil || img.How != FoundLocally || img.InRegistry {
		t.Fatalf("%+v %v\n%s", img, err, out)
	}
	if _, err := w.b.Push(ctx, img.Ref, Auth{User: "cnb", Password: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	// Found by the registry now, through the engine's view of it.
	if _, err := w.cli.DistributionInspect(ctx, img.Ref, ""); err != nil {
		t.Fatalf("the registry lacks the pushed image: %v", err)
	}
}

// A failing RUN step fails with the engine's message; its output was streamed; nothing is
// tagged. A COPY of a file not listed in by fails: it is not in the context.
func TestEnsureReportsBuildErrors(t *testing.T) {
	w := newEngineWorld(t)
	ctx := context.Background()
	w.write(t, "Dockerfile", "FROM "+w.base+"\nRUN echo about-to-fail && exit 3\n")
	w.write(t, "secret.txt", "s\n")
	w.write(t, "copy.Dockerfile", "FROM "+w.base+"\nCOPY secret.txt /s\n")
	img, out, err := w.ensure(t, ctx, Spec{Dockerfile: "Dockerfile"})
	if err == nil || !strings.Contains(err.Error(), "returned a non-zero code: 3") || !strings.Contains(out, "about-to-fail") {
		t.Fatalf("failing RUN: %+v %v\n%s", img, err, out)
	}
	if _, err := w.cli.ImageInspect(ctx, w.repository+":"+img.Version); err == nil && img.Version != "" {
		t.Fatal("a failed build was tagged")
	}
	_, out, err = w.ensure(t, ctx, Spec{Dockerfile: "copy.Dockerfile"})
	if err == nil || !strings.Contains(err.Error(), "secret.txt") {
		t.Fatalf("COPY of a file not in by: %v\n%s", err, out)
	}
	_, _, err = w.ensure(t, ctx, Spec{Dockerfile: "copy.Dockerfile", By: []string{"../etc/passwd"}})
	if err == nil || !strings.Contains(err.Error(), "stay inside") {
		t.Fatalf("a path out of the checkout: %v", err)
	}
}

// Cancelling stops a build at once.
func TestEnsureStopsWhenCancelled(t *testing.T) {
	w := newEngineWorld(t)
	w.write(t, "Dockerfile", "FROM "+w.base+"\nRUN echo sleeping && sleep 60\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	begin := time.Now()
	_, out, err := w.ensure(t, ctx, Spec{Dockerfile: "Dockerfile"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(begin) > 10*time.Second {
		t.Fatalf("after %v: %v\n%s", time.Since(begin), err, out)
	}
}
