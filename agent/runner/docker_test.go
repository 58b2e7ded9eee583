package runner

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/protocol"
)

func TestPluginJobsGetSettingsAndBuiltinsButNotUserEnv(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	plugin := protocol.Job{Key: "notify", Name: "notify", Kind: protocol.KindPlugin,
		Image: &protocol.Image{Name: h.image},
		Args:  []string{"sh", "-c", `echo "msg=$PLUGIN_MESSAGE n=$PLUGIN_COUNT list=$PLUGIN_LIST_ITEMS obj=$PLUGIN_TARGET ver=$PLUGIN_VERSION user=[$USER_VAR] secret=[$API_KEY] branch=$CNB_BRANCH"`},
		Settings: map[string]any{"message": "hello", "count": 3, "list-items": []any{1, "two"},
			"target": map[string]any{"host": "h"}, "version": "v${VERSION}"},
		Env:         map[string]string{"USER_VAR": "user-value"},
		RuntimeVars: []string{"VERSION"},
	}
	setter := script("set", `echo "##[set-output v=9]"`)
	setter.Exports = map[string]string{"v": "VERSION"}
	l := lease("plugin", plan(serial("s", setter, plugin)))
	l.Secrets = map[string]string{"API_KEY": "k"}
	res, rec := h.run(t, l)
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v: %q", res, logOf(rec, jobID(0, 1)))
	}
	want := `msg=hello n=3 list=[1,"two"] obj={"host":"h"} ver=v9 user=[] secret=[] branch=main` + "\n"
	if got := logOf(rec, jobID(0, 1)); got != want {
		t.Fatalf("plugin log %q\nwant %q", got, want)
	}
}

func TestShellCannotRunPluginJobs(t *testing.T) {
	h := newHarness(t, executor.ModeShell)
	plugin := protocol.Job{Key: "p", Name: "p", Kind: protocol.KindPlugin, Image: &protocol.Image{Name: "cnbcool/x"}}
	res, rec := h.run(t, lease("shell-plugin", plan(serial("s", plugin))))
	if res.Status != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), "needs Docker") {
		t.Fatalf("result %+v log %q", res, logOf(rec, jobID(0, 0)))
	}
}

func TestImagePrecedenceAndLimits(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	// The default image does not exist: a job that ran proves something else was chosen.
	r, err := New(Config{API: h.api, Executor: h.exec, WorkDir: h.workDir, DefaultImage: "nimbus-test/no-such-image:1",
		HeartbeatInterval: h.runner.cfg.HeartbeatInterval, LogFlushInterval: h.runner.cfg.LogFlushInterval,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.runner = r

	limits := script("limits", `cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes`)
	p := plan(serial("s", limits))
	p.Image = &protocol.Image{Name: h.image} // the pipeline's image beats the agent's default
	p.Runner.Cpus, p.Runner.MemoryGiB = 2, 1
	res, rec := h.run(t, lease("pipeline-image", p))
	if res.Status != StatusSuccess {
		t.Fatalf("pipeline image: %+v %q", res, logOf(rec, jobID(0, 0)))
	}
	if got := logOf(rec, jobID(0, 0)); !strings.Contains(got, "200000") || !strings.Contains(got, "1073741824") {
		t.Fatalf("limits not applied: %q", got)
	}

	setter := script("set", `echo "##[set-output img=`+h.image+`]"`)
	setter.Exports = map[string]string{"img": "JOB_IMAGE"}
	job := script("job-image", "echo ran")
	// The job's image beats the pipeline's, and is expanded at run time from an export.
	job.Image = &protocol.Image{Name: "${JOB_IMAGE}"}
	job.RuntimeVars = []string{"JOB_IMAGE"}
	setter.Image = &protocol.Image{Name: h.image}
	p = plan(serial("first", setter), serial("second", job))
	p.Image = &protocol.Image{Name: "nimbus-test/no-such-image:2"}
	res, rec = h.run(t, lease("job-image", p))
	if res.Status != StatusSuccess || logOf(rec, jobID(1, 0)) != "ran\n" {
		t.Fatalf("job image: %+v %q", res, logOf(rec, jobID(1, 0)))
	}
}
