package runner

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestPluginJobsGetSettingsAndBuiltinsButNotUserEnv(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	plugin := protocol.Job{Key: "notify", Name: "notify", Kind: protocol.KindPlugin,
		Image: &protocol.Image{Name: h.image},
		Args:  []string{"sh", "-c", `echo "msg=$PLUGIN_MESSAGE n=$PLUGIN_COUNT list=$PLUGIN_LIST_ITEMS obj=$PLUGIN_TARGET nested=$PLUGIN_NESTED dry=$PLUGIN_DRY_RUN ver=$PLUGIN_VERSION user=[$USER_VAR] secret=[$API_KEY] branch=$CNB_BRANCH"`},
		Settings: map[string]any{"message": "hello", "count": 3, "list-items": []any{1, "two"},
			"target": map[string]any{"host": "h"}, "version": "v${VERSION}",
			"nested": []any{map[string]any{"a": 1}}, "dry_run": true},
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
	want := `msg=hello n=3 list=1,two obj={"host":"h"} nested=[{"a":1}] dry=true ver=v9 user=[] secret=[] branch=main` + "\n"
	if got := logOf(rec, jobID(0, 1)); got != want {
		t.Fatalf("plugin log %q\nwant %q", got, want)
	}
}

// settingsFrom: a checkout file an earlier job wrote and a file of the server's (a secret
// repository's: every value masked) merge in order, and the job's own settings win over both.
func TestPluginSettingsFromFiles(t *testing.T) {
	h := newHarness(t, executor.ModeDocker)
	const secretURL = "https://nimbus.test/ml/keys/-/blob/main/plugin.yml"
	h.srv.SetImport(secretURL, protocol.ImportFile{Name: "plugin.yml", Secret: true,
		Content: "token: s3cret-token-77\nchannel: from-secret\nhosts: [a.example, b.example]\n"})
	write := script("write", `mkdir -p cfg && echo '{"webhook":"https://hook/local","channel":"from-file","token":"overridden"}' > cfg/plugin.json`)
	plugin := protocol.Job{Key: "notify", Name: "notify", Kind: protocol.KindPlugin,
		Image:        &protocol.Image{Name: h.image},
		Args:         []string{"sh", "-c", `echo "webhook=$PLUGIN_WEBHOOK channel=$PLUGIN_CHANNEL token=$PLUGIN_TOKEN hosts=$PLUGIN_HOSTS"`},
		SettingsFrom: []string{"./cfg/plugin.json", secretURL},
		Settings:     map[string]any{"channel": "own"},
	}
	res, rec := h.run(t, lease("settings-from", plan(serial("s", write, plugin))))
	log := logOf(rec, jobID(0, 1))
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v: %q", res, log)
	}
	mustContain(t, "the plugin's log", log, "webhook=https://hook/local channel=own token=*** hosts=***,***\n",
		"settingsFrom: ./cfg/plugin.json: 3 keys", "(masked: a secret repository)")
	if strings.Contains(log, "s3cret-token-77") {
		t.Fatalf("the secret shows in the log: %q", log)
	}
	got := h.srv.Imports()
	if len(got) != 1 || got[0].Kind != protocol.ImportSettingsFrom || got[0].Image != h.image || got[0].Job != "notify" {
		t.Fatalf("import requests %+v", got)
	}

	// A file that is not there fails the job and names it.
	plugin.SettingsFrom = []string{"https://nimbus.test/ml/keys/-/blob/main/missing.yml"}
	res, rec = h.run(t, lease("settings-from-missing", plan(serial("s", plugin))))
	if log := logOf(rec, jobID(0, 0)); res.Status != StatusFailed || !strings.Contains(log, "settingsFrom") || !strings.Contains(log, "missing.yml") {
		t.Fatalf("result %+v: %q", res, log)
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
	// The job's end names the image it ran by digest: the test image is imported, so it has no
	// registry digest and its id stands for it.
	info, err := h.exec.(*executor.Docker).Client().ImageInspect(context.Background(), h.image)
	if err != nil {
		t.Fatal(err)
	}
	if fin := rec.EventsOf(protocol.EventJobFinished, jobID(0, 0)); len(fin) != 1 || fin[0].Image == nil ||
		fin[0].Image.Ref != h.image || fin[0].Image.Digest != info.ID {
		t.Fatalf("job_finished %+v, want image %s at %s", fin, h.image, info.ID)
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
