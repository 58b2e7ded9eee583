package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// The all-in-one mode as `make run` starts it: no configuration but a port, SQLite and the
// secret key appear in ./data, the embedded Redis answers, the built-in agent starts.
func TestAllInOneStartsReadyWithin30s(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	env := []string{"NIMBUS_LISTEN=" + addr}
	if host := testenv.DockerHost(t); host != "" {
		env = append(env, "DOCKER_HOST="+host)
	}
	p := start(t, dir, env, "nimbus-server")
	took := waitReady(t, "http://"+addr, p, 30*time.Second)
	t.Logf("ready %v after start", took)

	if !p.stdout.contains("Nimbus is running at http://" + addr) {
		t.Errorf("the URL was not printed: %q", p.stdout)
	}
	for _, f := range []string{"data/nimbus.db", "data/secret.key", "data/agent/agent-id"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The built-in agent found the test Docker engine through DOCKER_HOST.
	deadline := time.Now().Add(5 * time.Second)
	for !p.stderr.contains(`"msg":"agent ready"`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !p.stderr.contains(`"executor":"docker"`) {
		t.Errorf("built-in agent did not choose Docker:\n%s", p.stderr)
	}
	// Every log line is JSON.
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %q", line)
		}
	}
	status, body := get(t, "http://"+addr+"/metrics")
	if status != 200 || !strings.Contains(body, "nimbus_http_requests_total") {
		t.Errorf("/metrics: %d", status)
	}
	if err, took := p.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	} else {
		t.Logf("stopped %v after SIGTERM", took)
	}
	if !p.stderr.contains("shutdown complete") {
		t.Error("no graceful shutdown logged")
	}
}

func TestAllInOneWithoutDockerWarnsLoudly(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := start(t, dir, []string{"NIMBUS_LISTEN=" + addr, "DOCKER_HOST=unix://" + filepath.Join(dir, "absent.sock")}, "nimbus-server")
	waitReady(t, "http://"+addr, p, 30*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for !p.stderr.contains("NO DOCKER ENGINE") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !p.stderr.contains(`"level":"WARN"`) || !p.stderr.contains(`"executor":"shell"`) {
		t.Fatalf("no loud shell-executor warning:\n%s", p.stderr)
	}
}

func TestExternalPostgresAndRedis(t *testing.T) {
	dbURL := storetest.PostgresURL(t)
	redisURL := redisDB(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	p := start(t, dir, []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_DATABASE_URL=" + dbURL, "NIMBUS_REDIS_URL=" + redisURL,
		"NIMBUS_PUBLIC_URL=https://ci.example.test"}, "nimbus-server")
	waitReady(t, "http://"+addr, p, 30*time.Second)
	if !p.stdout.contains("Nimbus is running at https://ci.example.test") {
		t.Errorf("public URL not used: %q", p.stdout)
	}
	if !p.stderr.contains(`"dialect":"postgres"`) {
		t.Errorf("not on PostgreSQL:\n%s", p.stderr)
	}
	if p.stderr.contains("agent ready") || p.stderr.contains("embedded Redis") {
		t.Errorf("embedded parts started although both URLs are set:\n%s", p.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "nimbus.db")); err == nil {
		t.Error("a SQLite file was created in PostgreSQL mode")
	}
}

func TestMigrateCommand(t *testing.T) {
	dbURL := storetest.EmptyPostgresURL(t)
	run := func() string {
		cmd := exec.Command(bin("nimbus-server"), "migrate")
		cmd.Env = []string{"NIMBUS_DATABASE_URL=" + dbURL, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
		return string(out)
	}
	var applied, version int
	if _, err := fmt.Sscanf(run(), "applied %d migration(s); postgres schema is at version %d", &applied, &version); err != nil ||
		applied < 1 || applied != version {
		t.Fatalf("first migrate: applied %d, version %d, %v", applied, version, err)
	}
	if out := run(); !strings.Contains(out, "applied 0 migration(s)") {
		t.Fatalf("second migrate: %q", out)
	}
}

func TestBadConfigurationFailsClearly(t *testing.T) {
	cmd := exec.Command(bin("nimbus-server"))
	cmd.Env = []string{"NIMBUS_DATABASE_URL=mysql://x", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NIMBUS_DATABASE_URL") {
		t.Fatalf("err=%v out=%q", err, out)
	}
}

// Every binary's --help lists each flag with the variable that sets it.
func TestHelpOfEveryBinary(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"nimbus-server", "--help"}, []string{"NIMBUS_LISTEN", "NIMBUS_PUBLIC_URL", "NIMBUS_DATA_DIR",
			"NIMBUS_DATABASE_URL", "NIMBUS_REDIS_URL", "NIMBUS_SECRET_KEY", "NIMBUS_BUILTIN_AGENT", "NIMBUS_AGENT_EXECUTOR"}},
		{[]string{"nimbus-agent", "--help"}, []string{"NIMBUS_SERVER_URL", "NIMBUS_AGENT_TOKEN", "NIMBUS_AGENT_TAGS", "NIMBUS_AGENT_EXECUTOR"}},
		{[]string{"nimbus", "--help"}, []string{"Commands:", "version"}},
	}
	for _, tt := range tests {
		out, err := exec.Command(bin(tt.args[0]), tt.args[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", tt.args, err, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v lacks %s:\n%s", tt.args, w, out)
			}
		}
		// A flag line without its variable would break the "every flag has an env var" promise.
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.HasPrefix(f[0], "--") && !strings.HasPrefix(f[1], "NIMBUS_") {
				t.Errorf("%v: flag %s has no NIMBUS_ variable", tt.args, f[0])
			}
		}
	}
}
