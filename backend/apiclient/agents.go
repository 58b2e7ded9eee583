package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Agent is an agent as the agent lists answer it: a platform agent (GET /admin/agents) or one
// of a team's own runners (GET /orgs/{org}/agents).
type Agent struct {
	ID        string          `json:"id"` // agt_…
	Name      string          `json:"name"`
	Tags      []string        `json:"tags"`
	Executor  string          `json:"executor"`
	CPUs      int             `json:"cpus"`
	Online    bool            `json:"online"`
	Paused    bool            `json:"paused"`
	Pipelines []AgentPipeline `json:"pipelines"` // what it runs now
}

// AgentPipeline is a pipeline an agent runs.
type AgentPipeline struct {
	ID          int64  `json:"id"`
	Name        string `json:"name"`
	Repo        string `json:"repo"`
	BuildNumber int64  `json:"build_number"`
}

// AgentList is a page of agents.
type AgentList struct {
	Items []Agent `json:"items"`
}

// TeamAgents lists the team's own runners (GET /orgs/{org}/agents).
func (c *Client) TeamAgents(ctx context.Context, org string) ([]Agent, error) {
	l, err := call[AgentList](ctx, c, http.MethodGet, Path("orgs", org, "agents"), nil)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PlatformAgents lists the platform's agents (GET /admin/agents; platform admins only).
func (c *Client) PlatformAgents(ctx context.Context) ([]Agent, error) {
	l, err := call[AgentList](ctx, c, http.MethodGet, Path("admin", "agents"), nil)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PauseTeamAgent stops one of the team's runners from taking new pipelines, and returns it
// (POST /orgs/{org}/agents/{id}/pause); ResumeTeamAgent lets it take them again.
func (c *Client) PauseTeamAgent(ctx context.Context, org, id string) (*Agent, error) {
	return call[Agent](ctx, c, http.MethodPost, Path("orgs", org, "agents", id, "pause"), nil)
}

// ResumeTeamAgent lets a paused runner of the team take pipelines again
// (POST /orgs/{org}/agents/{id}/resume).
func (c *Client) ResumeTeamAgent(ctx context.Context, org, id string) (*Agent, error) {
	return call[Agent](ctx, c, http.MethodPost, Path("orgs", org, "agents", id, "resume"), nil)
}

// RunnerToken is a team's runner registration token; Token (nbr_…) only in the answer that
// makes it.
type RunnerToken struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

// CreateRunnerToken makes a registration token for the team's own runners
// (POST /orgs/{org}/runner-tokens).
func (c *Client) CreateRunnerToken(ctx context.Context, org, name string) (*RunnerToken, error) {
	return call[RunnerToken](ctx, c, http.MethodPost, Path("orgs", org, "runner-tokens"), map[string]string{"name": name})
}

// Usage is one row of a team's usage: a day's pipelines of one repo on one runner class.
type Usage struct {
	Date        string `json:"date"`   // YYYY-MM-DD
	Bucket      string `json:"bucket"` // build or workspace
	RunnerClass string `json:"runner_class"`
	Repo        string `json:"repo"` // "" once the repo is deleted
	Pipelines   int    `json:"pipelines"`
	CoreSeconds int64  `json:"core_seconds"`
	Cost        string `json:"cost"`
}

// UsageList is a page of usage rows.
type UsageList struct {
	Items []Usage `json:"items"`
}

// Usage lists the team's usage rows of the current month (GET /orgs/{org}/billing/usage).
func (c *Client) Usage(ctx context.Context, org string) ([]Usage, error) {
	l, err := call[UsageList](ctx, c, http.MethodGet, Path("orgs", org, "billing", "usage"), nil)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// MetricSeries is the metric names reported on a branch and, when one was asked for, its points
// (GET /repos/{org}/{repo}/metrics).
type MetricSeries struct {
	Branch string        `json:"branch"`
	Names  []string      `json:"names"`
	Name   string        `json:"name"`
	Points []MetricPoint `json:"points"`
}

// MetricPoint is one value of a metric: a pipeline's report, with the pipeline of the branch's
// build before it that reported the metric (nil for the first).
type MetricPoint struct {
	Build            int64     `json:"build"` // the build number
	PipelineID       int64     `json:"pipeline_id"`
	Commit           string    `json:"commit"`
	Value            float64   `json:"value"`
	At               time.Time `json:"at"`
	PreviousPipeline *int64    `json:"previous_pipeline_id"`
}

// Metrics reads the metric names of a branch ("" for the repo's default branch) and, when
// name is not "", that metric's series.
func (c *Client) Metrics(ctx context.Context, org, repo, branch, name string) (*MetricSeries, error) {
	q := url.Values{}
	if branch != "" {
		q.Set("branch", branch)
	}
	if name != "" {
		q.Set("name", name)
	}
	path := Path("repos", org, repo, "metrics")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return call[MetricSeries](ctx, c, http.MethodGet, path, nil)
}

// Schedule is a cron schedule a branch's .cnb.yml registered.
type Schedule struct {
	ID     int64  `json:"id"`
	Branch string `json:"branch"`
	Event  string `json:"event"`
	Cron   string `json:"cron"`
	Zone   string `json:"zone"` // an IANA name, as browsers know it
}

// ScheduleList is a page of a repo's schedules.
type ScheduleList struct {
	Items []Schedule `json:"items"`
}

// Schedules lists the repo's schedules (GET /repos/{org}/{repo}/schedules).
func (c *Client) Schedules(ctx context.Context, org, repo string) ([]Schedule, error) {
	l, err := call[ScheduleList](ctx, c, http.MethodGet, Path("repos", org, repo, "schedules"), nil)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
