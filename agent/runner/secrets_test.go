package runner

import (
	"strings"
	"testing"
)

// A repo secret referenced from env used to become empty. The engine now leaves such a reference
// for run time (${NAME} in the job's RuntimeVars, as it plans `env: {ALIAS: ${MYSEC}}`); the
// agent fills it from the lease's secrets and masks the value in the log like the secret itself.
// An env value passing a secret through under its own name (`NPM_TOKEN: ${NPM_TOKEN}`) used to
// read itself and give the job the literal "${NPM_TOKEN}"; and an env value never sees its
// siblings, at run time as when planning.
func TestSecretsReferencedFromEnvReachTheJobMasked(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		j := script("use", `echo "alias=$ALIAS token=$NPM_TOKEN auth=$AUTH"
printf '%s\n' "$ALIAS" | tr a-z A-Z
printf '%s\n' "$NPM_TOKEN" | tr a-z A-Z
echo "sibling=[$URL] literal=$PRICE missing=[$NOPE]"`)
		j.Env = map[string]string{
			"ALIAS":     "${MYSEC}",
			"NPM_TOKEN": "${NPM_TOKEN}",
			"AUTH":      "Bearer ${MYSEC}",
			"HOST":      "example.com",
			"URL":       "https://${HOST}/x", // HOST is a sibling, and no secret
			"PRICE":     `\$5`,
			"NOPE":      "${NOT_A_SECRET}",
		}
		j.RuntimeVars = []string{"HOST", "MYSEC", "NOT_A_SECRET", "NPM_TOKEN"}
		l := lease("secret-env", plan(serial("s", j)))
		l.Secrets = map[string]string{"MYSEC": "s3cr3t-value", "NPM_TOKEN": "npm-token-value"}
		res, rec := h.run(t, l)
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v log %q", res, logOf(rec, jobID(0, 0)))
		}
		want := "alias=*** token=*** auth=Bearer ***\n" +
			// The job has the values: upper-cased, they are no longer the secret and show.
			"S3CR3T-VALUE\nNPM-TOKEN-VALUE\n" +
			"sibling=[https:///x] literal=$5 missing=[]\n"
		if got := logOf(rec, jobID(0, 0)); got != want {
			t.Fatalf("job log %q, want %q", got, want)
		}
	})
}

// The pipeline's own env (its if condition sees it) resolves secrets the same way.
func TestSecretsReferencedFromPipelineEnv(t *testing.T) {
	h := newHarness(t, "shell")
	p := plan(serial("s", script("j", "echo ran")))
	p.Env = map[string]string{"DEPLOY_KEY": "${DEPLOY_KEY}"}
	p.RuntimeVars = []string{"DEPLOY_KEY"}
	p.Conditions.If = `test "$DEPLOY_KEY" = key-value`
	l := lease("secret-pipeline-env", p)
	l.Secrets = map[string]string{"DEPLOY_KEY": "key-value"}
	res, rec := h.run(t, l)
	if st, _ := status(t, rec, jobID(0, 0)); res.Status != StatusSuccess || st != StatusSuccess {
		t.Fatalf("result %+v, job %s: the pipeline's if did not see the secret", res, st)
	}
	if !strings.Contains(logOf(rec, jobID(0, 0)), "ran") {
		t.Fatalf("job log %q", logOf(rec, jobID(0, 0)))
	}
}
