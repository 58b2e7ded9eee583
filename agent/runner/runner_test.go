package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// span is when a job ran, by its events.
func span(t *testing.T, rec fakeserver.Lease, id int64) (time.Time, time.Time) {
	t.Helper()
	started := rec.EventsOf(protocol.EventJobStarted, id)
	if len(started) != 1 {
		t.Fatalf("job %d: %d job_started events", id, len(started))
	}
	return started[0].At, rec.JobFinished(t, id).At
}

func TestParallelJobsOverlapAndSerialOnesDoNot(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		l := lease("timing", plan(
			parallel("together", script("a", "sleep 1"), script("b", "sleep 1")),
			serial("one-by-one", script("c", "sleep 1"), script("d", "sleep 1")),
		))
		start := time.Now()
		res, rec := h.run(t, l)
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		aStart, aEnd := span(t, rec, jobID(0, 0))
		bStart, bEnd := span(t, rec, jobID(0, 1))
		if !aStart.Before(bEnd) || !bStart.Before(aEnd) {
			t.Fatalf("parallel jobs did not overlap: a %v–%v, b %v–%v", aStart, aEnd, bStart, bEnd)
		}
		_, cEnd := span(t, rec, jobID(1, 0))
		dStart, _ := span(t, rec, jobID(1, 1))
		if dStart.Before(cEnd) {
			t.Fatalf("serial job d started at %v, before c ended at %v", dStart, cEnd)
		}
		if cStart, _ := span(t, rec, jobID(1, 0)); cStart.Before(aEnd) || cStart.Before(bEnd) {
			t.Fatal("the second stage started before the first ended")
		}
		took := time.Since(start)
		t.Logf("2 parallel + 2 serial jobs of 1 s took %v", took)
		if took < 3*time.Second {
			t.Fatalf("took %v: the serial jobs cannot have run one after the other", took)
		}
	})
}

func TestExportsReachLaterJobs(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		producer := script("produce", `echo "##[set-output version=1.2.3]"
echo "##[set-output greeting=base64,aGVsbG8gd29ybGQ=]"
echo "##[set-output multi=a%0Ab]"
echo "plain out"
echo "to err" >&2`)
		producer.Exports = map[string]string{"version": "VERSION", "greeting": "GREETING", "multi": "MULTI",
			"code": "PRODUCE_CODE", "stderr": "PRODUCE_ERR", "missing": "NEVER"}
		echoer := script("echo", `printf 'stdout=[%s]\n' "$PRODUCE_OUT"`)
		echoer.Exports = map[string]string{"stdout": "ECHO_OUT", "info": "ECHO_INFO"}
		consumer := script("consume", `echo "v=$VERSION g=$GREETING m=$(echo "$MULTI" | tr '\n' '+') c=$PRODUCE_CODE e=$PRODUCE_ERR msg=$MSG never=${NEVER-unset}"; echo "echo=$ECHO_OUT"`)
		// MSG refers to an exported variable: the engine left it for the agent to expand.
		consumer.Env = map[string]string{"MSG": `v${VERSION}-\$HOME`}
		consumer.RuntimeVars = []string{"VERSION"}
		res, rec := h.run(t, lease("exports", plan(
			serial("make", producer, echoer),
			serial("use", consumer),
		)))
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		got := logOf(rec, jobID(1, 0))
		want := "v=1.2.3 g=hello world m=a+b+ c=0 e=to err msg=v1.2.3-$HOME never=unset\n"
		if !strings.HasPrefix(got, want) {
			t.Fatalf("consumer log %q, want prefix %q", got, want)
		}
		if !strings.Contains(got, "echo=stdout=[]") {
			t.Fatalf("the stdout export of a serial job did not reach a later stage: %q", got)
		}
		ev := rec.JobFinished(t, jobID(0, 0))
		if ev.Exports["VERSION"] != "1.2.3" || ev.Exports["PRODUCE_ERR"] != "to err" || len(ev.Exports) != 5 {
			t.Fatalf("job_finished exports %v", ev.Exports)
		}
		if info := rec.JobFinished(t, jobID(0, 1)).Exports["ECHO_INFO"]; info != "stdout=[]" {
			t.Fatalf("info result %q", info)
		}
	})
}

func TestParallelJobsSeeExportsFromBeforeTheStage(t *testing.T) {
	h := newHarness(t, "shell")
	a := script("a", `echo "##[set-output v=from-a]"; sleep 0.3`)
	a.Exports = map[string]string{"v": "V"}
	b := script("b", `sleep 0.1; echo "b sees [$V]"`)
	c := script("c", `echo "c sees [$V]"`)
	_, rec := h.run(t, lease("par-exports", plan(parallel("p", a, b), serial("after", c))))
	if got := logOf(rec, jobID(0, 1)); got != "b sees []\n" {
		t.Fatalf("a parallel sibling saw an export of its stage: %q", got)
	}
	if got := logOf(rec, jobID(1, 0)); got != "c sees [from-a]\n" {
		t.Fatalf("the next stage missed the export: %q", got)
	}
}

func TestExit78StopsThePipelineWithSuccess(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		p := plan(
			serial("first", script("stop", "echo stopping; exit 78"), script("after-stop", "echo must-not-run")),
			serial("second", script("never", "echo must-not-run")),
		)
		p.EndStages = []protocol.Stage{serial("end", script("cleanup", `echo "end status=$CNB_PIPELINE_STATUS"`))}
		res, rec := h.run(t, lease("exit78", p))
		if res.Status != StatusSuccess || !strings.Contains(res.Reason, "78") {
			t.Fatalf("result %+v", res)
		}
		if st, code := status(t, rec, jobID(0, 0)); st != StatusSuccess || code != 78 {
			t.Fatalf("stop job: %s %d", st, code)
		}
		for _, id := range []int64{jobID(0, 1), jobID(1, 0)} {
			if st, _ := status(t, rec, id); st != StatusSkipped {
				t.Fatalf("job %d after exit 78 is %s", id, st)
			}
			if strings.Contains(logOf(rec, id), "must-not-run") {
				t.Fatalf("job %d ran", id)
			}
		}
		if got := logOf(rec, jobID(2, 0)); got != "end status=success\n" {
			t.Fatalf("end stage log %q", got)
		}
	})
}

func TestAllowFailureKeepsThePipelineGoing(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		flaky := script("flaky", "echo trying; exit 3")
		flaky.AllowFailure = true
		res, rec := h.run(t, lease("allow", plan(serial("s", flaky, script("next", "echo next ran")))))
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		if st, code := status(t, rec, jobID(0, 0)); st != StatusFailed || code != 3 {
			t.Fatalf("flaky job: %s %d", st, code)
		}
		if got := logOf(rec, jobID(0, 1)); got != "next ran\n" {
			t.Fatalf("next job log %q", got)
		}
	})
}

func TestFailureRunsFailStagesAndEndStages(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		p := plan(
			serial("build", script("compile", "echo compiling; exit 2"), script("package", "echo must-not-run")),
			serial("deploy", script("ship", "echo must-not-run")),
		)
		p.FailStages = []protocol.Stage{serial("notify", script("alert",
			`echo "failed stage=$CNB_BUILD_FAILED_STAGE_NAME msg=$CNB_BUILD_FAILED_MSG"`))}
		// An endStage failing does not change the pipeline's status.
		p.EndStages = []protocol.Stage{serial("end", script("report", `echo "end status=$CNB_PIPELINE_STATUS"; exit 1`))}
		res, rec := h.run(t, lease("fail", p))
		if res.Status != StatusFailed || !strings.Contains(res.Reason, `job "compile": exited with 2`) {
			t.Fatalf("result %+v", res)
		}
		if st, code := status(t, rec, jobID(0, 0)); st != StatusFailed || code != 2 {
			t.Fatalf("compile: %s %d", st, code)
		}
		for _, id := range []int64{jobID(0, 1), jobID(1, 0)} {
			if st, _ := status(t, rec, id); st != StatusSkipped {
				t.Fatalf("job %d after the failure is %s", id, st)
			}
		}
		if got := logOf(rec, jobID(2, 0)); !strings.HasPrefix(got, `failed stage=build msg=stage "build", job "compile": exited with 2`) {
			t.Fatalf("failStage log %q", got)
		}
		if got := logOf(rec, jobID(3, 0)); got != "end status=error\n" {
			t.Fatalf("endStage log %q", got)
		}
	})
}

func TestSuccessSkipsFailStages(t *testing.T) {
	h := newHarness(t, "shell")
	p := plan(serial("build", script("ok", "true")))
	p.FailStages = []protocol.Stage{serial("notify", script("alert", "echo must-not-run"))}
	p.EndStages = []protocol.Stage{serial("end", script("report", `echo "end status=$CNB_PIPELINE_STATUS"`))}
	res, rec := h.run(t, lease("ok-fail-stages", p))
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v", res)
	}
	if st, _ := status(t, rec, jobID(1, 0)); st != StatusSkipped {
		t.Fatalf("failStage job is %s", st)
	}
	if got := logOf(rec, jobID(2, 0)); got != "end status=success\n" {
		t.Fatalf("endStage log %q", got)
	}
}

func TestConditions(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		skipped := script("skipped", "echo must-not-run")
		skipped.Conditions.Skip = "ifModify: no matching file changed"
		skipped.Exports = map[string]string{"skip": "SKIP_REASON"}
		ifFalse := script("if-false", "echo must-not-run")
		ifFalse.Conditions.If = `echo checking; test "$CNB_BRANCH" = release`
		ifTrue := script("if-true", "echo ran")
		ifTrue.Conditions.If = `test "$CNB_BRANCH" = main`
		ifTrue.Exports = map[string]string{"skip": "IF_TRUE_SKIP"}
		reason := script("reason", `echo "reason=$SKIP_REASON"`)
		stageSkip := serial("stage-skip", script("x", "echo must-not-run"))
		stageSkip.Conditions.Skip = "not a new branch"
		stageIf := serial("stage-if", script("y", "echo must-not-run"), script("z", "echo must-not-run"))
		stageIf.Conditions.If = "exit 4"
		res, rec := h.run(t, lease("conditions", plan(
			serial("jobs", skipped, ifFalse, ifTrue, reason), stageSkip, stageIf)))
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		want := map[int64]string{jobID(0, 0): StatusSkipped, jobID(0, 1): StatusSkipped, jobID(0, 2): StatusSuccess,
			jobID(0, 3): StatusSuccess, jobID(1, 0): StatusSkipped, jobID(2, 0): StatusSkipped, jobID(2, 1): StatusSkipped}
		for id, w := range want {
			if st, _ := status(t, rec, id); st != w {
				t.Errorf("job %d is %s, want %s", id, st, w)
			}
			if strings.Contains(logOf(rec, id), "must-not-run") {
				t.Errorf("job %d ran", id)
			}
		}
		if got := logOf(rec, jobID(0, 3)); got != "reason=ifModify: no matching file changed\n" {
			t.Fatalf("skip result: %q", got)
		}
		if got := logOf(rec, jobID(0, 1)); got != "checking\n" {
			t.Fatalf("the if script's output belongs to the job's log: %q", got)
		}
		if len(rec.EventsOf(protocol.EventJobStarted, jobID(0, 1))) != 0 {
			t.Fatal("a job skipped by its if condition was reported started")
		}
		// A job with a condition that ran has an empty skip result.
		if v, ok := rec.JobFinished(t, jobID(0, 2)).Exports["IF_TRUE_SKIP"]; !ok || v != "" {
			t.Fatalf("skip result of a job that ran: %q %v", v, ok)
		}
	})
}

func TestUnsupportedAndBuiltinJobsFail(t *testing.T) {
	h := newHarness(t, "shell")
	unsupported := protocol.Job{Key: "release", Name: "release", Kind: protocol.KindBuiltin, Type: "git:release",
		Unsupported: "git:release is not supported by this installation"}
	builtin := protocol.Job{Key: "cache", Name: "cache", Kind: protocol.KindBuiltin, Type: "docker:cache"}
	builtin.AllowFailure = true
	unsupported.AllowFailure = true
	res, rec := h.run(t, lease("unsupported", plan(serial("s", unsupported, builtin))))
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v", res)
	}
	if st, _ := status(t, rec, jobID(0, 0)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 0)), unsupported.Unsupported) {
		t.Fatalf("unsupported job: %s %q", st, logOf(rec, jobID(0, 0)))
	}
	if st, _ := status(t, rec, jobID(0, 1)); st != StatusFailed || !strings.Contains(logOf(rec, jobID(0, 1)), `"docker:cache" is not supported`) {
		t.Fatalf("builtin job: %s %q", st, logOf(rec, jobID(0, 1)))
	}
}

func TestEnvLayersAndBuiltins(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		job := script("env", `echo "A=$A B=$B C=$C branch=$CNB_BRANCH build=$CNB_BUILD_ID ws=$CNB_BUILD_WORKSPACE stage=$CNB_BUILD_STAGE_NAME job=$CNB_BUILD_JOB_KEY"; pwd`)
		job.Env = map[string]string{"A": "from-job", "C": "from-job", "CNB_BRANCH": "hijacked"}
		setter := script("set", `echo "##[set-output c=from-export]"`)
		setter.Exports = map[string]string{"c": "C"}
		l := lease("env", plan(serial("first", setter), serial("second", job)))
		l.Secrets = map[string]string{"A": "from-secret", "B": "from-secret"}
		_, rec := h.run(t, l)
		ws := "/workspace"
		if h.image == "" {
			ws = h.workDir + "/workspaces/env"
		}
		want := "A=from-job B=*** C=from-export branch=main build=b-1 ws=" + ws + " stage=second job=env\n" + ws + "\n"
		if got := logOf(rec, jobID(1, 0)); got != want {
			t.Fatalf("log %q\nwant %q", got, want)
		}
	})
}

func TestShellGPUsAreTheLeasesOnly(t *testing.T) {
	h := newHarness(t, "shell")
	l := lease("gpus", plan(serial("s", script("g", `echo "cuda=$CUDA_VISIBLE_DEVICES"`))))
	l.GPUs = []string{"1", "3"}
	_, rec := h.run(t, l)
	if got := logOf(rec, jobID(0, 0)); got != "cuda=1,3\n" {
		t.Fatalf("log %q", got)
	}
}

func TestRetryRerunsAFailedJob(t *testing.T) {
	h := newHarness(t, "shell")
	job := script("flaky", `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo "try $n"; [ $n -ge 2 ]`)
	job.Retry = 2
	res, rec := h.run(t, lease("retry", plan(serial("s", job))))
	if res.Status != StatusSuccess {
		t.Fatalf("result %+v", res)
	}
	if got := logOf(rec, jobID(0, 0)); got != "try 1\n[nimbus] retrying (attempt 2 of 3)\ntry 2\n" {
		t.Fatalf("log %q", got)
	}
}
