package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// git:auto-merge merges the pull request of a pull_request.mergeable build with the pipeline's
// job token (protocol/pulls.go). Its options are CNB's:
//
//	mergeType            auto (the first mode the repository allows), merge, squash or rebase
//	mergeCommitMessage   the merge or squash commit's message (the server's default when empty)
//	mergeCommitFooter    appended to the message after a blank line
//	removeSourceBranch   delete the source branch after the merge
//	ignoreAssignee       accepted; requests have no assignees here
//
// The server merges only through the request's merge gate, so a task that runs after someone
// pushed again fails with the gate's reasons instead of merging what was not reviewed.

const typeGitAutoMerge = "git:auto-merge"

// Merger is the part of the agent's client that merges a pull request with a job token.
type Merger interface {
	MergePull(ctx context.Context, jobToken, slug string, number int64, req protocol.MergeRequest) (protocol.MergedPull, error)
}

// autoMergeRequest reads git:auto-merge's options.
func autoMergeRequest(opts map[string]any) (protocol.MergeRequest, error) {
	req := protocol.MergeRequest{Mode: "auto"}
	var footer string
	var err error
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		switch k {
		case "mergeType":
			req.Mode, err = optionString(opts[k])
			if err == nil {
				req.Mode = strings.ToLower(strings.TrimSpace(req.Mode))
				if !slices.Contains([]string{"auto", "merge", "squash", "rebase"}, req.Mode) {
					err = fmt.Errorf("%q: use auto, merge, squash or rebase", req.Mode)
				}
			}
		case "mergeCommitMessage":
			req.Message, err = optionString(opts[k])
		case "mergeCommitFooter":
			footer, err = optionString(opts[k])
		case "removeSourceBranch":
			req.DeleteSourceBranch, err = optionBool(opts[k])
		default:
			// ignoreAssignee and other CNB options are accepted and have no effect here.
		}
		if err != nil {
			return req, fmt.Errorf("option %s: %w", k, err)
		}
	}
	if req.Mode == "" {
		req.Mode = "auto"
	}
	if footer = strings.TrimSpace(footer); footer != "" {
		if strings.TrimSpace(req.Message) == "" {
			return req, errors.New("option mergeCommitFooter needs mergeCommitMessage: the server's default message cannot take a footer")
		}
		req.Message = strings.TrimRight(req.Message, "\n") + "\n\n" + footer
	}
	return req, nil
}

// gitAutoMerge runs git:auto-merge.
func (x *run) gitAutoMerge(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	fail := func(err error) jobResult {
		if ctx.Err() != nil {
			return x.interrupted(ctx)
		}
		jl.note("%s: %v", typeGitAutoMerge, err)
		return x.failure(job, typeGitAutoMerge+": "+err.Error(), nil)
	}
	m, ok := x.cfg.API.(Merger)
	if !ok {
		return fail(errors.New("this agent cannot merge pull requests"))
	}
	number, ok := pullNumber(env)
	if !ok {
		return fail(errors.New("no pull request: git:auto-merge runs in a pull_request.mergeable build"))
	}
	opts := runtimeOptions(job.Options, job.RuntimeVars, env)
	req, err := autoMergeRequest(opts)
	if err != nil {
		return fail(err)
	}
	// The message lands in the repository's history: mask it like any report.
	req = maskReport(req, x.secretList())
	slug := env["CNB_REPO_SLUG"]
	out, err := m.MergePull(ctx, x.lease.JobToken, slug, number, req)
	if err != nil {
		return fail(err)
	}
	jl.note("%s: merged pull request #%d of %s (%s) as %s", typeGitAutoMerge, out.Number, slug, out.MergeMode, out.MergeCommit)
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code}
}

// pullNumber is the pipeline's pull request (CNB_PULL_REQUEST_IID); false outside a pull
// request's build.
func pullNumber(env map[string]string) (int64, bool) {
	n, err := strconv.ParseInt(env["CNB_PULL_REQUEST_IID"], 10, 64)
	return n, err == nil && n > 0
}
