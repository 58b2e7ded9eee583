package runner

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// leakedIn lists where any of the values shows in what the server recorded of a lease: its job
// logs, its events and its finish, as JSON (so a map key counts as much as a value).
func leakedIn(t *testing.T, rec fakeserver.Lease, values ...string) []string {
	t.Helper()
	var where []string
	for id, log := range rec.Logs {
		for _, v := range values {
			if strings.Contains(string(log), v) {
				where = append(where, "log of job "+strconv.FormatInt(id, 10)+": "+v)
			}
		}
	}
	for _, ev := range rec.Events {
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if strings.Contains(string(raw), v) {
				where = append(where, "event "+string(raw)+": "+v)
			}
		}
	}
	raw, _ := json.Marshal(rec.Finish)
	for _, v := range values {
		if strings.Contains(string(raw), v) {
			where = append(where, "finish "+string(raw)+": "+v)
		}
	}
	return where
}

// runWithout runs a lease of one job, which must succeed with none of values in what the
// server recorded, and returns the job's log.
func runWithout(t *testing.T, h *harness, l protocol.Lease, values ...string) string {
	t.Helper()
	res, rec := h.run(t, l)
	log := logOf(rec, jobID(0, 0))
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v: %q", res, log)
	}
	if where := leakedIn(t, rec, values...); len(where) > 0 {
		t.Fatalf("a secret, or a piece of one, shows: %q\nlog:\n%s", where, log)
	}
	return log
}

// A multi-line secret, and a multi-line value of a secret repository's file (a certificate),
// used to be masked only when printed whole: `echo "$MULTI" | tail -n1` showed its last line,
// and so did every tool that prints a value line by line. Every line of 4 bytes or more is now
// masked on its own; shorter lines are not, or every "ab" of the log would go.
func TestMultiLineSecretIsMaskedLineByLine(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		const certURL = "https://nimbus.test/ml/keys/-/blob/main/tls.yml"
		h.srv.SetImport(certURL, protocol.ImportFile{Name: "tls.yml", Secret: true,
			Content: "CERT: \"-----BEGIN TEST CERT-----\\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\\nWVphYmNkZWZnaGlqa2xtbm9w\\n-----END TEST CERT-----\\n\"\n"})
		j := script("print", `echo "$MULTI" | tail -n1
echo "$MULTI" | head -n1
env | sort | grep -v '^CERT='
echo "$CERT" | sed -n 2p
echo "$CERT" | sed -n 3p
echo "short lines stay: ab cd"`)
		j.Imports = []string{certURL}
		l := lease("multi-line-secret", plan(serial("s", j)))
		l.Secrets = map[string]string{"MULTI": "line1-AAAA1111\nline2-BBBB2222\nab\n  cd  "}
		log := runWithout(t, h, l, "line1-AAAA1111", "line2-BBBB2222", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", "WVphYmNkZWZnaGlqa2xtbm9w")
		mustContain(t, "the job's log", log, "***\n***\n", "short lines stay: ab cd\n")
	})
}

// A secret printed in two pieces with a write to stderr between them
// (`printf 'imported-A-'; echo noise >&2; printf 'secret-5678\n'`) used to show as its two
// halves: both streams went through one masker, so the stderr write ended the held-back first
// half. Each stream is now masked on its own before the two are merged.
func TestSecretSplitByStderrIsMasked(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		j := script("split", `printf 'imported-A-'; sleep 0.2; echo noise >&2; sleep 0.2; printf 'secret-5678\n'
printf 'err-half-' >&2; sleep 0.2; echo out-noise; sleep 0.2; printf 'other-9876\n' >&2`)
		l := lease("stderr-split", plan(serial("s", j)))
		l.Secrets = map[string]string{"A": "imported-A-secret-5678", "B": "err-half-other-9876"}
		log := runWithout(t, h, l, "imported-A-", "secret-5678", "err-half-", "other-9876")
		// The other stream's line still shows, and the secrets are one mask each.
		if strings.Count(log, "***") != 2 || !strings.Contains(log, "noise\n") || !strings.Contains(log, "out-noise\n") {
			t.Fatalf("log %q", log)
		}
	})
}

// What a job reports besides its log used to keep secrets: a metric named after a secret
// (`##[set-output metric.${MYSECRET}=1]`) was masked in the log line but listed by name in
// job_finished, and a secret that is a number was reported as a metric's value. Every report now
// goes through the masker on its way out; a metric whose name or value holds a secret is left
// out with a note (masked, it would no longer be a valid name).
func TestEveryReportedFieldIsMasked(t *testing.T) {
	h := newHarness(t, "shell")
	const tok, pin = "tok-Qz81xLm", "73914682"
	report := script("report", `echo "##[set-output metric.acc-$TOK=1]"
echo "##[set-output metric.pin=$PIN]"
echo "##[set-output metric.ok=2]"
echo "##[set-output out=v-$TOK]"
echo "out-$TOK"
echo "err-$PIN" >&2`)
	report.Exports = map[string]string{"out": "OUT", "stdout": "SO", "stderr": "SE", "info": "INFO", "metric.pin": "PINV"}
	// A failure whose message names a secret: the import path is expanded at run time.
	fail := script("fail", "true")
	fail.Imports = []string{"./cfg-${TOK}.yml"}
	fail.RuntimeVars = []string{"TOK"}
	l := lease("reported-fields", plan(serial("s", report, fail)))
	l.Secrets = map[string]string{"TOK": tok, "PIN": pin}
	res, rec := h.run(t, l)
	if res.Status != StatusFailed || !strings.Contains(rec.Finish.Reason, "cfg-***.yml") {
		t.Fatalf("result %+v, finish %+v", res, rec.Finish)
	}
	if where := leakedIn(t, rec, tok, pin); len(where) > 0 {
		t.Fatalf("a secret was reported: %q", where)
	}
	ev := rec.JobFinished(t, jobID(0, 0))
	if len(ev.Metrics) != 1 || ev.Metrics["ok"] != 2 {
		t.Errorf("metrics %v, want only ok=2", ev.Metrics)
	}
	want := map[string]string{"OUT": "v-***", "SE": "err-***", "PINV": "***"}
	for k, v := range want {
		if ev.Exports[k] != v {
			t.Errorf("export %s = %q, want %q (all: %v)", k, ev.Exports[k], v, ev.Exports)
		}
	}
	if !strings.HasSuffix(ev.Exports["SO"], "\nout-***") || !strings.Contains(ev.Exports["INFO"], "out-***") ||
		!strings.Contains(ev.Exports["INFO"], "err-***") {
		t.Errorf("exports SO %q, INFO %q", ev.Exports["SO"], ev.Exports["INFO"])
	}
	mustContain(t, "the job's log", logOf(rec, jobID(0, 0)), `metric "acc-***": its name holds a secret; left out`,
		"metric pin: its value holds a secret; left out")
}
