package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Keyer is the part of the agent's client behind cnb:resolve and cnb:await (protocol/builds.go).
type Keyer interface {
	Resolve(ctx context.Context, leaseID string, req protocol.KeyRequest) error
	Await(ctx context.Context, leaseID string, req protocol.KeyRequest) (protocol.KeyAnswer, error)
}

// cnbResolve resolves options.key of the build with options.data.
func (x *run) cnbResolve(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	kr, key, opts, fail := x.keyTask(ctx, job, env, jl, "cnb:resolve")
	if kr == nil {
		return fail
	}
	data, _ := opts["data"].(map[string]any)
	if v, ok := opts["data"]; ok && data == nil && v != nil {
		return x.keyFailure(ctx, job, jl, "cnb:resolve", errors.New("option data must be a map"))
	}
	if err := kr.Resolve(ctx, x.lease.ID, maskReport(protocol.KeyRequest{Key: key, Data: data}, x.secretList())); err != nil {
		return x.keyFailure(ctx, job, jl, "cnb:resolve", err)
	}
	jl.note("cnb:resolve: %q resolved", key)
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code}
}

// cnbAwait waits until options.key of the build is resolved, then its data is the result (deep
// keys as "a.b" for exports), or fails with the server's "dead lock found." or at the job's
// timeout.
func (x *run) cnbAwait(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	kr, key, _, fail := x.keyTask(ctx, job, env, jl, "cnb:await")
	if kr == nil {
		return fail
	}
	jctx := ctx
	if t := job.Timeout.Std(); t > 0 {
		var cancel context.CancelFunc
		jctx, cancel = context.WithTimeoutCause(ctx, t, errJobTimeout)
		defer cancel()
	}
	noted := false
	for {
		// Masked as cnb:resolve masks its key (reports.go), so the two still meet.
		ans, err := kr.Await(jctx, x.lease.ID, maskReport(protocol.KeyRequest{Key: key}, x.secretList()))
		switch {
		case ctx.Err() != nil:
			return x.interrupted(ctx)
		case jctx.Err() != nil:
			jl.note("cnb:await: %q not resolved after %s", key, job.Timeout.Std())
			return x.failure(job, fmt.Sprintf("cnb:await: %q not resolved after %s", key, job.Timeout.Std()), nil)
		case err != nil:
			return x.keyFailure(ctx, job, jl, "cnb:await", err)
		case ans.Resolved:
			jl.note("cnb:await: %q resolved", key)
			code := exitSuccess
			return jobResult{status: StatusSuccess, code: &code, exports: exportValues(job, flattenData("", ans.Data, map[string]string{}))}
		}
		if !noted {
			jl.note("cnb:await: waiting for %q", key)
			noted = true
		}
		select {
		case <-jctx.Done():
		case <-time.After(x.cfg.WaitPollInterval):
		}
	}
}

// keyTask reads the options of a key task; kr is nil when it cannot run (fail says how it ended).
func (x *run) keyTask(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog, what string) (Keyer, string, map[string]any, jobResult) {
	kr, ok := x.cfg.API.(Keyer)
	if !ok {
		return nil, "", nil, x.keyFailure(ctx, job, jl, what, errors.New("this agent cannot resolve or await keys"))
	}
	opts := runtimeOptions(job.Options, job.RuntimeVars, env)
	key, err := optionString(opts["key"])
	if err != nil || strings.TrimSpace(key) == "" {
		return nil, "", nil, x.keyFailure(ctx, job, jl, what, errors.New("the option key is required"))
	}
	return kr, key, opts, jobResult{}
}

func (x *run) keyFailure(ctx context.Context, job protocol.Job, jl *jobLog, what string, err error) jobResult {
	if ctx.Err() != nil {
		return x.interrupted(ctx)
	}
	jl.note("%s: %v", what, err)
	return x.failure(job, what+": "+err.Error(), nil)
}

// flattenData is an await's result: every value of data by its dotted path (a map or list also
// as JSON), so exports can name deep keys such as b.c.
func flattenData(prefix string, v any, out map[string]string) map[string]string {
	switch t := v.(type) {
	case map[string]any:
		if prefix != "" {
			raw, _ := json.Marshal(t)
			out[prefix] = string(raw)
		}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flattenData(p, t[k], out)
		}
	case []any:
		raw, _ := json.Marshal(t)
		out[prefix] = string(raw)
	case nil:
		out[prefix] = ""
	case string:
		out[prefix] = t
	default:
		raw, _ := json.Marshal(t)
		out[prefix] = string(raw)
	}
	return out
}
