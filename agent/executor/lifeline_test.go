package executor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/nimbus-build/nimbus/internal/lifeline"
	"github.com/nimbus-build/nimbus/internal/lifeline/lifelinetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// lifelineInit is the init that steps run under in the tests with lifelines (the nimbus CLI),
// built once by TestMain.
var lifelineInit string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "nimbus-init-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if lifelineInit, err = lifelinetest.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// newLines makes lifelines for a test's executor.
func newLines(t testing.TB) *lifeline.Lines {
	t.Helper()
	ls, err := lifeline.New(context.Background(), filepath.Join(t.TempDir(), "lifelines"), lifelineInit)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// Under a lifeline the init runs what the engine would have: the image's entrypoint with the
// step's arguments, or with the image's command when the step gives none, and the image's own
// command in a shell-less image.
func TestLifelineRunsTheImagesCommand(t *testing.T) {
	d, img := newDocker(t)
	d.Lifelines = newLines(t)
	ctx := context.Background()
	ref := entrypointImage(t, d, img)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"entrypoint with the step's arguments", []string{"given"}, "entry given\n"},
		{"entrypoint with the image's command", nil, "entry default\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out lockedBuffer
			code, err := d.Run(ctx, Step{Name: "plugin", Image: ref, Args: tc.args, Output: &out})
			if err != nil || code != 0 || out.String() != tc.want {
				t.Fatalf("exit %d, %v, output %q; want %q", code, err, out.String(), tc.want)
			}
		})
	}
	t.Run("arguments without an entrypoint", func(t *testing.T) {
		var out lockedBuffer
		code, err := d.Run(ctx, Step{Name: "plugin", Image: img, Args: []string{"echo", "from-args"}, Output: &out})
		if err != nil || code != 0 || out.String() != "from-args\n" {
			t.Fatalf("exit %d, %v, output %q", code, err, out.String())
		}
	})
	t.Run("a shell-less workspace keeps its own command", func(t *testing.T) {
		c := startContainer(t, d, Step{Name: "distroless", Image: noShellImage(t, d, img)})
		info, err := d.cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(info.Config.Cmd, " "); got != "/bin/busybox sleep 3600" || info.Config.Entrypoint[0] != InitPath {
			t.Fatalf("the container runs %q %q, want the image's command under %s", info.Config.Entrypoint, got, InitPath)
		}
		time.Sleep(300 * time.Millisecond) // a container whose main process failed would be gone by now
		if info, err := d.cli.ContainerInspect(ctx, c.ID); err != nil || !info.State.Running {
			t.Fatalf("state %+v %v", info.State, err)
		}
	})
}

// entrypointImage commits an image of img whose entrypoint is `echo entry` and command `default`.
func entrypointImage(t *testing.T, d *Docker, img string) string {
	t.Helper()
	ref := "nimbus-test/entrypoint:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := d.cli.ContainerCommit(context.Background(), createdContainer(t, d, img), container.CommitOptions{Reference: ref,
		Changes: []string{`ENTRYPOINT ["echo", "entry"]`, `CMD ["default"]`}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true}) })
	return ref
}

// stepsAgentEnv, in a child process of TestStepsEndWithTheAgent, makes it the agent: it starts
// steps of every kind and waits to be killed.
const stepsAgentEnv = "NIMBUS_TEST_STEPS_AGENT"

// kill -9 of the agent used to leave every container it had started running (until the agent
// was started again and removed them) and every host process of the shell executor for good.
// Under lifelines, a job's script ignoring SIGTERM, a plugin's entrypoint, a workspace of an
// image without a shell, its IDE container and a shell step with a background child all end
// within 10 s of the agent's death, with no restart.
func TestStepsEndWithTheAgent(t *testing.T) {
	if args := os.Getenv(stepsAgentEnv); args != "" {
		actAsAgent(t, args)
		return
	}
	d, img := newDocker(t)
	noShell := noShellImage(t, d, img)
	mark := strconv.Itoa(600_000 + int(time.Now().UnixNano()%300_000)) // seconds no other process sleeps
	lines := filepath.Join(t.TempDir(), "lifelines")
	sleeping := func() []string { return lifelinetest.Processes("sleep " + mark) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child, out := lifelinetest.Agent(t, "TestStepsEndWithTheAgent",
		stepsAgentEnv+"="+strings.Join([]string{d.agentID, lines, noShell, mark, t.TempDir()}, ","))
	// Whatever happens, nothing of the child's stays on the shared engine and host.
	t.Cleanup(func() {
		d.Cleanup(context.Background())
		for _, p := range lifelinetest.Processes("sleep " + mark) {
			pid, _, _ := strings.Cut(p, ":")
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "steps started" {
	}
	running := func() int {
		list, err := d.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelAgent+"="+d.agentID))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for deadline := time.Now().Add(30 * time.Second); running() < 4 || len(sleeping()) < 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers and these processes run, want 4 containers and 4 sleeps:\n%s", running(), strings.Join(sleeping(), "\n"))
		}
	}
	child.Process.Kill()
	child.Wait()
	killed := time.Now()
	for running() > 0 || len(sleeping()) > 0 {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("10 s after kill -9 of the agent, %d of its containers run, and these processes:\n%s", running(), strings.Join(sleeping(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every container and process of the agent was gone %v after kill -9 of it", time.Since(killed).Round(time.Millisecond))
}

// actAsAgent starts, as args say (agent id, lifelines dir, a shell-less image, the seconds to
// sleep, a checkout), one step of each kind under lifelines, and waits to be killed.
func actAsAgent(t *testing.T, args string) {
	a := strings.Split(args, ",")
	id, dir, noShell, mark, checkout := a[0], a[1], a[2], a[3], a[4]
	ctx := context.Background()
	d, err := NewDocker(ctx, testenv.DockerHost(t), id)
	if err != nil {
		t.Fatal(err)
	}
	d.NetworkMode = "none"
	if d.Lifelines, err = lifeline.New(ctx, dir, lifelineInit); err != nil {
		t.Fatal(err)
	}
	img := testenv.Image(t)
	go d.Run(ctx, Step{Name: "job", Image: img, Script: "trap '' TERM INT HUP; while :; do sleep " + mark + "; done"})
	go d.Run(ctx, Step{Name: "plugin", Image: img, Args: []string{"sleep", mark}})
	workspace, err := d.StartContainer(ctx, Step{Name: "workspace", Image: noShell})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.StartContainer(ctx, Step{Name: "ide", Image: img, Script: "exec sleep " + mark, NetworkOf: workspace.ID}); err != nil {
		t.Fatal(err)
	}
	sh := &Shell{Lifelines: d.Lifelines}
	go sh.Run(ctx, Step{Name: "host", Checkout: checkout, Script: "sleep " + mark + " & sleep " + mark, Output: io.Discard})
	fmt.Println("steps started")
	select {}
}

// BenchmarkLifelineStart is what a lifeline adds to a step: the same `true` step run straight
// through the Docker executor without and with lifelines, in turns, so that an engine busy with
// other work weighs on both alike. It reports the median of each.
//
//	e2e/testenv.sh go test -run '^$' -bench LifelineStart -benchtime 20x ./agent/executor
func BenchmarkLifelineStart(b *testing.B) {
	bare, img := newDocker(b)
	lined := *bare
	lined.Lifelines = newLines(b)
	ctx := context.Background()
	step := func(d *Docker) time.Duration {
		start := time.Now()
		if code, err := d.Run(ctx, Step{Name: "true", Image: img, Script: "true"}); err != nil || code != 0 {
			b.Fatalf("step: %d %v", code, err)
		}
		return time.Since(start)
	}
	step(bare)
	step(&lined)
	var without, with []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // each goes first half of the time
			without = append(without, step(bare))
			with = append(with, step(&lined))
		} else {
			with = append(with, step(&lined))
			without = append(without, step(bare))
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	b.ReportMetric(float64(median(without).Milliseconds()), "bare-p50-ms")
	b.ReportMetric(float64(median(with).Milliseconds()), "lifeline-p50-ms")
	b.Logf("a `true` step over %d runs: p50 %v bare, %v under its lifeline", len(with), median(without).Round(time.Millisecond), median(with).Round(time.Millisecond))
}
