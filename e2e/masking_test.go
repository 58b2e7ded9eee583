package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// The secrets of TestSecretsNeverLeak. None is written in the .cnb.yml: jobs reach them by
// their names only, so anywhere one shows, a job's report carried it.
const (
	leakSingle   = "single-Zq8vK2x"
	leakMulti    = "line1-AAAA1111\nline2-BBBB2222"
	leakNum      = "73914682" // a secret that is a number: a metric's value could carry it
	leakImported = "imported-A-secret-5678"
	leakCertBody = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\nWVphYmNkZWZnaGlqa2xtbm9w"
)

// maskingCI prints the secrets whole, line by line, split across writes and split by writes to
// the other stream, and plants them in every field a job reports: metric names and values,
// set-output values and exported streams, the data of cnb:resolve, the env of a build cnb:apply
// starts, a release's title and notes, a release file's name and a tag, and a failure's reason.
const maskingCI = `main:
  push:
    - name: leaks
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      imports: https://cnb.cool/ml/keys/-/blob/main/env.yml
      stages:
        - name: print
          script: |
            echo "whole: $SINGLE $MULTI $IMPORTED $NUM"
            echo "$CERT"
            echo "$MULTI" | tail -n1
            echo "$MULTI" | head -n1
            echo "$CERT" | sed -n 3p
            env | sort
            for v in "$SINGLE" "$IMPORTED" "$NUM"; do printf '%s' "$(echo "$v" | cut -c1-4)"; sleep 0.2; echo "$v" | cut -c5-; done
            printf '%s' "$(echo "$IMPORTED" | cut -c1-11)"; sleep 0.2; echo noise >&2; sleep 0.2; echo "$IMPORTED" | cut -c12-
            printf '%s' "$(echo "$SINGLE" | cut -c1-6)" >&2; sleep 0.2; echo out-noise; sleep 0.2; echo "$SINGLE" | cut -c7- >&2
        - name: report
          script: |
            echo "##[set-output metric.acc-$SINGLE=1]"
            echo "##[set-output metric.num=$NUM]"
            echo "##[set-output metric.ok=0.5]"
            echo "##[set-output leaked=$IMPORTED]"
            echo "##[set-output multi=$(printf '%s' "$MULTI" | awk 'BEGIN { ORS = "%0A" } 1')]"
            echo "err $SINGLE" >&2
          exports: { leaked: LEAKED, multi: MULTI_OUT, stdout: SO, stderr: SE, info: INFO, metric.num: NUM_OUT }
        - name: use
          script: test "$LEAKED" = "$IMPORTED" && test "$NUM_OUT" = "$NUM" && echo "the exports reach later jobs whole"
        - name: resolve
          type: cnb:resolve
          options: { key: "k-${SINGLE}", data: { token: "${IMPORTED}", multi: "${MULTI}", cert: "${CERT}" } }
        - name: apply
          type: cnb:apply
          options: { event: api_trigger_child, env: { LEAK: "${SINGLE}", CERT_COPY: "${CERT}" } }
        - name: fail
          imports: ./missing-${SINGLE}.yml
          script: echo never
  api_trigger_child:
    - name: child
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: child
          script: echo "child got $LEAK"
$:
  tag_push:
    - name: release
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      imports: https://cnb.cool/ml/keys/-/blob/main/env.yml
      stages:
        - name: build
          script: |
            mkdir -p dist && echo model > dist/model.bin && echo x > "dist/asset-$SINGLE.bin"
            printf 'Notes: %s\n%s\n' "$IMPORTED" "$CERT" > NOTES.md
        - name: release
          type: git:release
          options: { title: "Model ${SINGLE}", descriptionFromFile: NOTES.md, attachments: [dist/model.bin] }
        - name: asset
          image: cnbcool/attachments:latest
          allowFailure: true
          settings: { attachments: ["dist/asset-*.bin"] }
        - name: bad tag
          type: git:release
          allowFailure: true
          options: { tag: "${SINGLE}" }
`

// TestSecretsNeverLeak plants a repo secret, a multi-line one, a number and the values of a
// secret repository's file (a certificate among them) in a push build, the build its cnb:apply
// starts and a tag build that releases, and finds none of them in the logs, in any answer of
// the API about the builds (pipelines, jobs, metrics, releases, records, artifacts), in the
// provenance records, in a pg_dump of the database, or in the agent's and the server's own logs.
//
// It fails on the code before issue 32: a line of a multi-line secret showed (`tail -n1`,
// `env`), a secret split by a write to stderr showed as its halves, a metric named after a
// secret kept it in /metrics and the database, and a secret number became a metric's value;
// cnb:resolve's data, cnb:apply's env and a release's title and notes kept them as written.
func TestSecretsNeverLeak(t *testing.T) {
	w := newWorld(t)
	agent, _ := w.agent("")
	for name, value := range map[string]string{"SINGLE": leakSingle, "MULTI": leakMulti, "NUM": leakNum} {
		w.alice.setSecret("ml", "trainer", name, value)
	}
	w.alice.createRepo("ml", apiclient.NewRepo{Name: "keys", Secret: true})
	cert := "-----BEGIN TEST CERT-----\n" + leakCertBody + "\n-----END TEST CERT-----\n"
	envYml, _ := json.Marshal(map[string]any{"allow_slugs": "ml/trainer", "IMPORTED": leakImported, "CERT": cert})
	w.alice.putSecretFile("ml", "keys", "env.yml", string(envYml))

	n := w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(maskingCI, "IMAGE", w.image)})
	b := w.waitFor(n, 3*time.Minute, "the end", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
	if len(b.Pipelines) != 1 {
		t.Fatalf("build #%d: %s, %d pipelines, error %+v", n, b.Status, len(b.Pipelines), b.Error)
	}
	leaks := b.Pipelines[0]
	if b.Status != "failed" || !strings.Contains(leaks.Reason, `stage "fail"`) || !strings.Contains(leaks.Reason, "missing-***.yml") {
		t.Fatalf("build #%d: %s, reason %q: want it failed at its last stage, the path masked", n, b.Status, leaks.Reason)
	}
	log := func(stage int) string { return w.jobLog(leaks.Stages[stage].Jobs[0].ID) }
	printed := log(0)
	for _, want := range []string{"whole: *** *** *** ***\n", "***\n***\n", "noise\n", "out-noise\n"} {
		if !strings.Contains(printed, want) {
			t.Errorf("the print job's log lacks %q:\n%s", want, printed)
		}
	}
	if use := log(2); !strings.Contains(use, "the exports reach later jobs whole") {
		t.Errorf("a later job did not get the exports unmasked:\n%s", use)
	}
	if report := log(1); !strings.Contains(report, `metric "acc-***": its name holds a secret; left out`) ||
		!strings.Contains(report, "metric num: its value holds a secret; left out") {
		t.Errorf("the report job's log does not say why two metrics were left out:\n%s", report)
	}

	// The tag build releases; the build cnb:apply started (#2) has ended by now too.
	gitRun(t, w.work, "tag", "v1.0")
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, w.work, "push", "-q", u.String(), "refs/tags/v1.0")
	child := w.waitBuildSuccess(n+1, 2*time.Minute)
	if got := w.jobLog(child.Pipelines[0].Stages[0].Jobs[0].ID); !strings.Contains(got, "child got ***") {
		t.Errorf("the child build's log: %q", got)
	}
	tagged := w.waitBuildSuccess(n+2, 3*time.Minute)
	rel := tagged.Pipelines[0]
	if got := w.jobLog(rel.Stages[2].Jobs[0].ID); !strings.Contains(got, `the file name "asset-***.bin" holds a secret`) {
		t.Errorf("publishing a file named after a secret was not refused by name:\n%s", got)
	}
	if got := w.jobLog(rel.Stages[3].Jobs[0].ID); !strings.Contains(got, `the tag "***" holds a secret`) {
		t.Errorf("a tag that is a secret was not refused:\n%s", got)
	}
	release := w.alice.release("ml", "trainer", "v1.0")
	if release.Title != "Model ***" || !strings.HasPrefix(release.Notes, "Notes: ***\n") || len(release.Files) != 1 || release.Files[0].Name != "model.bin" {
		t.Errorf("the release: %+v", release)
	}

	// Everything the API answers about the builds.
	secrets := []string{leakSingle, leakMulti, leakNum, leakImported, leakCertBody}
	secrets = append(secrets, strings.Split(leakMulti, "\n")...)
	secrets = append(secrets, strings.Split(leakCertBody, "\n")...)
	// The halves the print job writes on one stream with a write to the other between them.
	secrets = append(secrets, leakImported[:11], leakImported[11:], leakSingle[6:])
	answers := map[string]string{}
	get := func(path string) string {
		var raw json.RawMessage
		w.alice.must(200, "GET", path, nil, &raw) // a session: every scope
		answers[path] = string(raw)
		return string(raw)
	}
	repoAPI := "/api/v1/repos/ml/trainer"
	get(repoAPI + "/builds")
	var pipelines []int64
	for _, num := range []int64{n, n + 1, n + 2} {
		var bj apiclient.Build
		if err := json.Unmarshal([]byte(get(repoAPI+"/builds/"+itoa(num))), &bj); err != nil {
			t.Fatal(err)
		}
		for _, p := range bj.Pipelines {
			pipelines = append(pipelines, p.ID)
			get(repoAPI + "/pipelines/" + itoa(p.ID) + "/record")
			get(repoAPI + "/pipelines/" + itoa(p.ID) + "/artifacts")
			for _, st := range p.Stages {
				for _, j := range st.Jobs {
					answers["log of job "+itoa(j.ID)] = w.jobLog(j.ID)
					get("/api/v1/jobs/" + itoa(j.ID) + "/log/times")
				}
			}
		}
	}
	get(repoAPI + "/records/compare?a=" + itoa(pipelines[0]) + "&b=" + itoa(pipelines[len(pipelines)-1]))
	var metrics struct {
		Names []string `json:"names"`
	}
	if err := json.Unmarshal([]byte(get(repoAPI+"/metrics")), &metrics); err != nil {
		t.Fatal(err)
	}
	if strings.Join(metrics.Names, ",") != "ok" {
		t.Errorf("metric names %v, want only ok", metrics.Names)
	}
	for _, name := range metrics.Names {
		get(repoAPI + "/metrics?name=" + url.QueryEscape(name))
	}
	get(repoAPI + "/releases")
	get(repoAPI + "/releases/v1.0")
	answers["the server's /metrics"] = mustGet(t, w.base+"/metrics")
	answers["pg_dump"] = pgDump(t, w)
	answers["the agent's own log"] = agent.stdout.String() + agent.stderr.String()
	answers["the server's own log"] = w.server.stdout.String() + w.server.stderr.String()
	for where, text := range answers {
		for _, s := range secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows the secret %q: …%s…", where, s, text[max(0, i-200):min(len(text), i+len(s)+100)])
			}
		}
	}
}

func mustGet(t *testing.T, u string) string {
	t.Helper()
	status, body := get(t, u)
	if status != 200 {
		t.Fatalf("GET %s: %d", u, status)
	}
	return body
}

// pgDump dumps the world's database as SQL text.
func pgDump(t *testing.T, w *world) string {
	t.Helper()
	var dbURL string
	for _, kv := range w.env {
		if v, ok := strings.CutPrefix(kv, "NIMBUS_DATABASE_URL="); ok {
			dbURL = v
		}
	}
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
		if len(matches) == 0 {
			t.Fatal("pg_dump is neither on PATH nor in /usr/lib/postgresql/*/bin")
		}
		pgDump = matches[len(matches)-1]
	}
	cmd := exec.Command(pgDump, "--no-owner", "--dbname", dbURL)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !strings.Contains(string(out), "COPY ") {
		t.Fatalf("pg_dump wrote no table data (%d bytes)", len(out))
	}
	return string(out)
}
