package e2e

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// timingCI: two object-form (parallel) jobs that each sleep 2 s and record when they ran, then an
// array-form (serial) stage, then a stage whose second job consumes what the first exported.
// /proc/uptime is the host's clock in every container, so the times compare across jobs.
const timingCI = `
main:
  push:
    - name: timing
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: parallel
          jobs:
            left:
              script: echo "start $(cut -d' ' -f1 /proc/uptime)"; sleep 2; echo "end $(cut -d' ' -f1 /proc/uptime)"
            right:
              script: echo "start $(cut -d' ' -f1 /proc/uptime)"; sleep 2; echo "end $(cut -d' ' -f1 /proc/uptime)"
        - name: serial
          jobs:
            - name: first
              script: echo "start $(cut -d' ' -f1 /proc/uptime)"; sleep 1; echo "end $(cut -d' ' -f1 /proc/uptime)"
            - name: second
              script: echo "start $(cut -d' ' -f1 /proc/uptime)"; sleep 1; echo "end $(cut -d' ' -f1 /proc/uptime)"
        - name: handover
          jobs:
            - name: produce
              script: echo "##[set-output model=v42]"
              exports:
                model: MODEL_VERSION
            - name: consume
              script: echo "model is $MODEL_VERSION in $CNB_REPO_SLUG"; test "$MODEL_VERSION" = v42
`

type span struct{ start, end float64 }

func parseSpan(t testing.TB, log string) span {
	t.Helper()
	var s span
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "start":
			s.start = v
		case "end":
			s.end = v
		}
	}
	if s.start == 0 || s.end == 0 {
		t.Fatalf("no start/end in log %q", log)
	}
	return s
}

// Issue 5's run: a real server on PostgreSQL and Redis, a real nimbus-agent with the Docker
// executor, a push with the real git client; parallel jobs overlap, serial ones do not, logs
// stream live over SSE, exports reach later jobs.
func TestPipelineRunsOnAnAgentInDocker(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	redisURL := redisDB(t)
	dockerHost, image := testenv.DockerHost(t), testenv.Image(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	srv := start(t, dir, []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_DATABASE_URL=" + dbURL, "NIMBUS_REDIS_URL=" + redisURL,
		"NIMBUS_AGENT_REGISTRATION_TOKEN=e2e-registration"}, "nimbus-server")
	waitReady(t, base, srv, 30*time.Second)
	agentDir := t.TempDir()
	start(t, agentDir, []string{"NIMBUS_SERVER_URL=" + base, "NIMBUS_AGENT_TOKEN=e2e-registration", "NIMBUS_AGENT_EXECUTOR=docker",
		"NIMBUS_AGENT_DOCKER_HOST=" + dockerHost, "NIMBUS_AGENT_NETWORK=none", "NIMBUS_AGENT_WORK_DIR=" + agentDir,
		"NIMBUS_AGENT_CPUS=4", "NIMBUS_AGENT_DEFAULT_IMAGE=" + image}, "nimbus-agent")

	alice := newClient(t, base)
	alice.signup("alice")
	alice.createOrg("ml")
	alice.createRepo("ml", apiclient.NewRepo{Name: "trainer"})
	tok := alice.newToken("git", "repo:write")
	api := tokenClient(t, base, tok)

	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, ".cnb.yml"), []byte(strings.ReplaceAll(timingCI, "IMAGE", image)), 0o644)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "timing")
	u, _ := url.Parse(base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", tok)
	gitRun(t, work, "push", "-q", u.String(), "main")

	// Follow the first parallel job's log live: its first line arrives before the job ends.
	b := api.build("ml", "trainer", 1)
	if len(b.Pipelines) != 1 || len(b.Pipelines[0].Stages) != 3 {
		t.Fatalf("build %+v", b)
	}
	jobs := map[string]int64{}
	for _, st := range b.Pipelines[0].Stages {
		for _, j := range st.Jobs {
			jobs[j.Name] = j.ID
		}
	}
	live := make(chan string, 100)
	go streamLog(t, base, tok, jobs["left"], live)
	select {
	case first := <-live:
		if !strings.HasPrefix(first, "start ") {
			t.Fatalf("first streamed line %q", first)
		}
		b = api.build("ml", "trainer", 1)
		if b.Status != "running" {
			t.Fatalf("the first log line arrived after the build ended (%s): not live", b.Status)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no live log line within 60 s; agent log:\n%s", srv.stderr)
	}

	deadline := time.Now().Add(90 * time.Second)
	for b.Status == "queued" || b.Status == "running" {
		if time.Now().After(deadline) {
			t.Fatalf("build still %s after 90 s: %+v", b.Status, b)
		}
		time.Sleep(300 * time.Millisecond)
		b = api.build("ml", "trainer", 1)
	}
	if b.Status != "success" {
		t.Fatalf("build %s: %+v", b.Status, b)
	}
	logOf := func(name string) string {
		req, _ := http.NewRequest("GET", base+"/api/v1/jobs/"+strconv.FormatInt(jobs[name], 10)+"/log", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			sb.WriteString(sc.Text() + "\n")
		}
		return sb.String()
	}
	left, right := parseSpan(t, logOf("left")), parseSpan(t, logOf("right"))
	first, second := parseSpan(t, logOf("first")), parseSpan(t, logOf("second"))
	if left.start >= right.end || right.start >= left.end {
		t.Errorf("object-form jobs did not overlap: left %+v right %+v", left, right)
	}
	if second.start < first.end {
		t.Errorf("array-form jobs overlapped: first %+v second %+v", first, second)
	}
	if first.start < max(left.end, right.end) {
		t.Errorf("the serial stage started before the parallel stage ended")
	}
	if got := logOf("consume"); !strings.Contains(got, "model is v42 in ml/trainer") {
		t.Errorf("exports did not reach the next job: %q", got)
	}
}

// streamLog reads a job's SSE stream and sends each data line until the stream ends.
func streamLog(t *testing.T, base, token string, jobID int64, lines chan<- string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/jobs/"+strconv.FormatInt(jobID, 10)+"/log/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			lines <- strings.TrimSpace(data)
		}
	}
}
