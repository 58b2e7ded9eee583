package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// harness is one runner against the fake control plane over real HTTP, with a real executor.
type harness struct {
	srv     *fakeserver.Server
	api     *client.Client
	runner  *Runner
	exec    executor.Executor
	image   string // the test image (Docker), "" for the shell executor
	workDir string
	docker  *dockerclient.Client // nil for the shell executor
	agentID string
}

func newHarness(t testing.TB, mode string) *harness {
	t.Helper()
	h := &harness{srv: fakeserver.New(t), workDir: t.TempDir(),
		agentID: "test-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())}
	switch mode {
	case executor.ModeDocker:
		host := testenv.DockerHost(t)
		h.image = testenv.Image(t)
		d, err := executor.NewDocker(context.Background(), host, h.agentID)
		if err != nil {
			t.Fatal(err)
		}
		d.NetworkMode = "none"
		h.exec = d
		h.docker, err = dockerclient.NewClientWithOpts(dockerclient.WithHost(host), dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			d.Cleanup(context.Background())
			h.docker.Close()
		})
	default:
		h.exec = executor.NewShell()
	}
	t.Cleanup(func() { h.exec.Close() })
	api, err := client.New(h.srv.URL, h.srv.AgentToken, client.Options{
		Retry: client.Retry{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, GiveUpAfter: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	h.api = api
	h.runner, err = New(Config{
		API: api, Executor: h.exec, WorkDir: h.workDir, DefaultImage: h.image,
		HeartbeatInterval: h.srv.Intervals.HeartbeatInterval.Std(),
		LogFlushInterval:  h.srv.Intervals.LogFlushInterval.Std(),
		WaitPollInterval:  20 * time.Millisecond,
		Log:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// lease makes a lease of the plan with every job numbered: job j of stage s (over stages,
// failStages, endStages) gets id jobID(s, j).
func lease(id string, plan protocol.Plan) protocol.Lease {
	l := protocol.Lease{ID: id, PipelineID: 1, BuildID: 1, Plan: plan,
		Env: map[string]string{"CNB_BUILD_ID": "b-1"}}
	si := 0
	for _, group := range [][]protocol.Stage{plan.Stages, plan.FailStages, plan.EndStages} {
		for _, st := range group {
			for ji := range st.Jobs {
				l.Jobs = append(l.Jobs, protocol.JobRef{Stage: si, Job: ji, ID: jobID(si, ji)})
			}
			si++
		}
	}
	return l
}

func jobID(stage, job int) int64 { return int64(100*(stage+1) + job) }

func script(key, s string) protocol.Job {
	return protocol.Job{Key: key, Name: key, Kind: protocol.KindScript, Script: s}
}

func serial(name string, jobs ...protocol.Job) protocol.Stage {
	return protocol.Stage{Name: name, Jobs: jobs}
}

func parallel(name string, jobs ...protocol.Job) protocol.Stage {
	return protocol.Stage{Name: name, Parallel: true, Jobs: jobs}
}

func plan(stages ...protocol.Stage) protocol.Plan {
	return protocol.Plan{Name: "p", Key: "pipeline-0", Stages: stages,
		Builtins: map[string]string{"CNB_BRANCH": "main", "CI": "true"},
		Runner:   protocol.Runner{Cpus: 1, MaxDuration: protocol.Duration(time.Hour)}}
}

// start hands the lease out through a real poll and runs it in the background.
func (h *harness) start(t testing.TB, l protocol.Lease) <-chan runOutcome {
	t.Helper()
	h.srv.Enqueue(l)
	got, err := h.api.Poll(context.Background(), protocol.PollRequest{FreeCPUs: 1})
	if err != nil || got == nil || got.ID != l.ID {
		t.Fatalf("poll: %+v %v", got, err)
	}
	done := make(chan runOutcome, 1)
	go func() {
		res, err := h.runner.Run(context.Background(), context.Background(), got)
		done <- runOutcome{res, err}
	}()
	return done
}

type runOutcome struct {
	res Result
	err error
}

// run runs the lease to completion and returns what the server recorded.
func (h *harness) run(t testing.TB, l protocol.Lease) (Result, fakeserver.Lease) {
	t.Helper()
	select {
	case o := <-h.start(t, l):
		if o.err != nil {
			t.Fatalf("run: %v", o.err)
		}
		rec := h.srv.Get(l.ID)
		if rec.Finish == nil || rec.Finish.Status != o.res.Status {
			t.Fatalf("run returned %+v, the server recorded finish %+v", o.res, rec.Finish)
		}
		if rec.Finishs != 1 {
			t.Fatalf("finish sent %d times", rec.Finishs)
		}
		if _, err := os.Stat(filepath.Join(h.workDir, "workspaces", l.ID)); !os.IsNotExist(err) {
			t.Fatalf("the checkout survived the run: %v", err)
		}
		return o.res, rec
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end")
	}
	return Result{}, fakeserver.Lease{}
}

// containers lists the containers of a lease still on the engine.
func (h *harness) containers(t testing.TB, leaseID string) int {
	t.Helper()
	if h.docker == nil {
		return 0
	}
	list, err := h.docker.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "nimbus.lease="+leaseID))})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// status returns a job's job_finished status and exit code (-1 when none).
func status(t *testing.T, rec fakeserver.Lease, id int64) (string, int) {
	t.Helper()
	ev := rec.JobFinished(t, id)
	code := -1
	if ev.ExitCode != nil {
		code = *ev.ExitCode
	}
	return ev.Status, code
}

func logOf(rec fakeserver.Lease, id int64) string { return string(rec.Logs[id]) }

// eachExecutor runs a test on both executors.
func eachExecutor(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, mode := range []string{executor.ModeDocker, executor.ModeShell} {
		t.Run(mode, func(t *testing.T) { f(t, newHarness(t, mode)) })
	}
}
