package agentapi

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Builds that pipelines start (protocol/builds.go). cnb:apply builds the pipeline's own repo as
// the user the pipeline runs as, and only from the events CNB allows it on; cnb:trigger builds
// another repo of this install with the token the task names, which must be a person's token
// that may write to that repo (a job token never starts builds). Both pass the variables that
// name their origin (APPLY_TRIGGER_* / API_TRIGGER_*, which the child cannot override), and
// the child links to the pipeline and build that started it.

// applyEvents are the events whose pipelines may run cnb:apply (CNB's list).
var applyEvents = []string{"push", "commit.add", "branch.create", "pull_request.target", "pull_request.mergeable", "tag_push",
	"pull_request.merged", "api_trigger", "web_trigger", "crontab", "tag_deploy"}

func applyAllowed(event string) bool {
	return slices.Contains(applyEvents, event) || strings.HasPrefix(event, "api_trigger_") ||
		strings.HasPrefix(event, "web_trigger_") || strings.HasPrefix(event, "tag_deploy.")
}

// StartBuild starts the build a job of the agent's running pipeline asks for.
func (h *Handler) StartBuild(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.StartBuildRequest) (protocol.ChildBuild, error) {
	p, err := h.cfg.Runs.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return protocol.ChildBuild{}, err
	}
	if p.CancelRequested {
		return protocol.ChildBuild{}, fault.Conflict("the pipeline is being stopped: it starts no builds")
	}
	run, err := h.cfg.Runs.RunInfo(ctx, p)
	if err != nil {
		return protocol.ChildBuild{}, err
	}
	event := req.Event
	var who *auth.Principal // nil: the pipeline's own repo, as its own user (cnb:apply)
	var slug string
	var user *int64
	prefix := "APPLY_TRIGGER_"
	switch req.Kind {
	case protocol.StartApply:
		if !applyAllowed(run.Event) {
			return protocol.ChildBuild{}, fault.Forbidden("cnb:apply does not run on %s events", run.Event)
		}
		if run.TriggeredBy != 0 {
			user = &run.TriggeredBy
		}
		if event == "" {
			event = "api_trigger"
		}
	case protocol.StartTrigger:
		prefix = "API_TRIGGER_"
		if req.Token == "" || h.cfg.ResolveToken == nil {
			return protocol.ChildBuild{}, fault.Invalid("token", "cnb:trigger needs a token that may start builds in %s", req.Slug)
		}
		if event == "" {
			return protocol.ChildBuild{}, fault.Invalid("event", "cnb:trigger needs an event (api_trigger or api_trigger_…)")
		}
		pr, err := h.cfg.ResolveToken(ctx, req.Token)
		if err != nil || pr.Kind == auth.KindJob || pr.User == nil {
			return protocol.ChildBuild{}, fault.Forbidden("cnb:trigger's token is not a valid token of a person of this install")
		}
		who, slug, user = pr, req.Slug, &pr.User.ID
	default:
		return protocol.ChildBuild{}, fault.Invalid("kind", "kind must be %s or %s", protocol.StartApply, protocol.StartTrigger)
	}
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	parent := run.OrgName + "/" + run.RepoName
	short := run.CommitSHA
	if len(short) > 8 {
		short = short[:8]
	}
	origin := map[string]string{"BUILD_ID": "nimbus-" + strconv.FormatInt(run.BuildID, 10), "PIPELINE_ID": strconv.FormatInt(p.ID, 10), "REPO_SLUG": parent,
		"REPO_ID": strconv.FormatInt(p.RepoID, 10), "BRANCH": run.Branch, "COMMIT": run.CommitSHA, "COMMIT_SHORT": short}
	for k, v := range origin {
		env[prefix+k] = v // set last: the task cannot override them
	}
	if req.Kind == protocol.StartApply {
		env["APPLY_TRIGGER_ORIGIN_EVENT"] = run.Event
	}
	env[prefix+"USER"] = "" // StartChild names the parent's user
	var config []byte
	if req.Config != "" {
		if req.Kind != protocol.StartApply {
			return protocol.ChildBuild{}, fault.Invalid("config", "only cnb:apply takes a config")
		}
		config = []byte(req.Config)
	}
	st, err := h.cfg.Runs.StartChild(ctx, p, build.ChildRequest{Principal: who, Slug: slug, UserID: user, Branch: req.Branch, Event: event,
		Env: env, Config: config, OriginPrefix: prefix})
	if err != nil {
		return protocol.ChildBuild{}, err
	}
	child, b := st.Slug, st.Build
	h.log.InfoContext(ctx, "pipeline started a build", "pipeline", p.ID, "build", child+"#"+strconv.FormatInt(b.Number, 10), "kind", req.Kind)
	return protocol.ChildBuild{Slug: child, Number: b.Number, URL: h.buildURL(child, b.Number), Status: b.Status, Finished: build.Terminal(b.Status)}, nil
}

// ChildBuild says how a build the agent's pipeline started stands.
func (h *Handler) ChildBuild(ctx context.Context, a *scheduler.Agent, leaseID string, ref protocol.ChildBuildRef) (protocol.ChildBuild, error) {
	p, err := h.cfg.Runs.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return protocol.ChildBuild{}, err
	}
	st, err := h.cfg.Runs.Child(ctx, p, ref.Slug, ref.Number)
	if err != nil {
		return protocol.ChildBuild{}, err
	}
	return protocol.ChildBuild{Slug: st.Slug, Number: st.Build.Number, URL: h.buildURL(st.Slug, st.Build.Number), Status: st.Build.Status,
		Finished: build.Terminal(st.Build.Status), LastJobExports: st.LastJobExports}, nil
}

func (h *Handler) buildURL(slug string, n int64) string {
	return h.cfg.PublicURL + "/" + slug + "/builds/" + strconv.FormatInt(n, 10)
}

// ResolveKey is cnb:resolve for the agent's running pipeline.
func (h *Handler) ResolveKey(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.KeyRequest) error {
	p, err := h.cfg.Runs.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return err
	}
	return h.cfg.Runs.Resolve(ctx, p, req.Key, req.Data)
}

// AwaitKey is one ask of cnb:await for the agent's running pipeline.
func (h *Handler) AwaitKey(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.KeyRequest) (protocol.KeyAnswer, error) {
	p, err := h.cfg.Runs.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return protocol.KeyAnswer{}, err
	}
	data, ok, err := h.cfg.Runs.Await(ctx, p, req.Key)
	if err != nil {
		return protocol.KeyAnswer{}, err
	}
	return protocol.KeyAnswer{Resolved: ok, Data: data}, nil
}

// Import reads a file a job of the agent's running pipeline imports (protocol.ImportRequest),
// with the pipeline's own rights (build.Service.ReadImport).
func (h *Handler) Import(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.ImportRequest) (protocol.ImportFile, error) {
	switch req.Kind {
	case protocol.ImportEnv, protocol.ImportSettingsFrom, protocol.ImportOptionsFrom:
	default:
		return protocol.ImportFile{}, fault.Invalid("kind", "kind must be %s, %s or %s", protocol.ImportEnv, protocol.ImportSettingsFrom, protocol.ImportOptionsFrom)
	}
	p, err := h.cfg.Runs.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return protocol.ImportFile{}, err
	}
	return h.cfg.Runs.ReadImport(ctx, p, req.URL, req.Kind, req.Image)
}
