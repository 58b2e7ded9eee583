package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// cnb:apply and cnb:trigger start a build through the server (protocol/builds.go): cnb:apply
// of the pipeline's own repo (options event, default api_trigger; config or configFrom, a
// .cnb.yml to use instead of the branch's; env), cnb:trigger of another repo (slug, token, event,
// branch, env). With sync the task waits for the build and fails when it fails, unless
// continueOnBuildError. The results, for exports: sn (org/repo#number), buildLogUrl, message,
// buildSuccess ("true"/"false", with sync) and lastJobExports (JSON, with sync).

// Starter is the part of the agent's client that starts builds for a pipeline.
type Starter interface {
	StartBuild(ctx context.Context, leaseID string, req protocol.StartBuildRequest) (protocol.ChildBuild, error)
	ChildBuild(ctx context.Context, leaseID string, ref protocol.ChildBuildRef) (protocol.ChildBuild, error)
}

// childPoll is how often a sync task asks how its build stands.
const childPoll = 2 * time.Second

func (x *run) cnbApply(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	return x.startBuild(ctx, job, env, jl, protocol.StartApply)
}

func (x *run) cnbTrigger(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	return x.startBuild(ctx, job, env, jl, protocol.StartTrigger)
}

func (x *run) startBuild(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog, kind string) jobResult {
	what := "cnb:" + kind
	fail := func(err error) jobResult {
		if ctx.Err() != nil {
			return x.interrupted(ctx)
		}
		jl.note("%s: %v", what, err)
		return x.failure(job, what+": "+err.Error(), nil)
	}
	st, ok := x.cfg.API.(Starter)
	if !ok {
		return fail(errors.New("this agent cannot start builds"))
	}
	opts := runtimeOptions(job.Options, job.RuntimeVars, env)
	str := func(k string) string { s, _ := optionString(opts[k]); return s }
	req := protocol.StartBuildRequest{Kind: kind, Event: str("event"), Branch: str("branch"), Slug: str("slug"), Token: str("token")}
	if kind == protocol.StartApply {
		req.Slug, req.Token = "", ""
		req.Config = str("config")
		if from := str("configFrom"); from != "" && req.Config == "" {
			b, err := x.readCheckoutFile(from)
			if err != nil {
				return fail(fmt.Errorf("configFrom: %w", err))
			}
			req.Config = string(b)
		}
	}
	if req.Token != "" {
		x.addSecrets([]string{req.Token}, jl)
	}
	if e, err := optionMap(opts["env"]); err != nil {
		return fail(fmt.Errorf("option env: %w", err))
	} else {
		req.Env = e
	}
	sync, err := optionBool(opts["sync"])
	if err != nil {
		return fail(fmt.Errorf("option sync: %w", err))
	}
	keepGoing, err := optionBool(opts["continueOnBuildError"])
	if err != nil {
		return fail(fmt.Errorf("option continueOnBuildError: %w", err))
	}
	// Masked on its way out (reports.go), but for the token: the server checks it, and never
	// stores it.
	token := req.Token
	req = maskReport(req, x.secretList())
	req.Token = token
	child, err := st.StartBuild(ctx, x.lease.ID, req)
	if err != nil {
		return fail(err)
	}
	sn := child.Slug + "#" + strconv.FormatInt(child.Number, 10)
	jl.note("%s: started build %s: %s", what, sn, child.URL)
	results := map[string]string{"sn": sn, "buildLogUrl": child.URL, "message": "started " + sn}
	if sync {
		for !child.Finished {
			select {
			case <-ctx.Done():
				return x.interrupted(ctx)
			case <-time.After(childPoll):
			}
			if child, err = st.ChildBuild(ctx, x.lease.ID, protocol.ChildBuildRef{Slug: child.Slug, Number: child.Number}); err != nil {
				return fail(err)
			}
		}
		ok := child.Status == "success"
		results["buildSuccess"] = strconv.FormatBool(ok)
		results["message"] = fmt.Sprintf("build %s ended %s", sn, child.Status)
		raw, _ := json.Marshal(child.LastJobExports)
		results["lastJobExports"] = string(raw)
		jl.note("%s: %s", what, results["message"])
		if !ok && !keepGoing {
			res := x.failure(job, what+": "+results["message"], nil)
			res.exports = exportValues(job, results)
			return res
		}
	}
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code, exports: exportValues(job, results)}
}
