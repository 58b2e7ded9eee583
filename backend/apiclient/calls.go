package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The calls below are the API as the CLI and the end-to-end tests use it. Each response type
// holds only the fields its callers read; contract_test.go checks every one of them against
// the operation's documented response, so a renamed or removed field fails there first.

// Session is the answer to signup: the session cookie is in the client's jar, and the CSRF
// token goes with every later request (Signup keeps it in the client).
type Session struct {
	CSRF string `json:"csrf_token"`
}

// Signup creates an account and signs it in (POST /auth/signup). On a client made
// WithSession, the client keeps the session for its later requests; sign up before sharing the
// client between goroutines.
func (c *Client) Signup(ctx context.Context, email, username, password string) (*Session, error) {
	var s Session
	err := c.Do(ctx, http.MethodPost, Path("auth", "signup"),
		map[string]string{"email": email, "username": username, "password": password}, &s)
	if err != nil {
		return nil, err
	}
	if c.session {
		c.csrf = s.CSRF
	}
	return &s, nil
}

// Token is a personal access token or a repo's deploy token as it is created: the secret
// (Token) is in this answer only.
type Token struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Token  string   `json:"token"`
	Scopes []string `json:"scopes"`
}

// CreateToken creates a personal access token of the signed-in user with the scopes
// (POST /user/tokens); the route takes only a session (WithSession, after Signup).
func (c *Client) CreateToken(ctx context.Context, name string, scopes ...string) (*Token, error) {
	if scopes == nil {
		scopes = []string{} // the document wants an array; the server says which scopes are missing
	}
	return call[Token](ctx, c, http.MethodPost, Path("user", "tokens"), map[string]any{"name": name, "scopes": scopes})
}

// CreateDeployToken creates a read-only token of one repo (POST
// /repos/{org}/{repo}/deploy-tokens): what inference services pull models and images with.
func (c *Client) CreateDeployToken(ctx context.Context, org, repo, name string) (*Token, error) {
	return call[Token](ctx, c, http.MethodPost, Path("repos", org, repo, "deploy-tokens"), map[string]string{"name": name})
}

// Org is an organization (a team) as its member sees it.
type Org struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"`
}

// CreateOrg creates a team whose owner is the caller (POST /orgs).
func (c *Client) CreateOrg(ctx context.Context, name string) (*Org, error) {
	return call[Org](ctx, c, http.MethodPost, Path("orgs"), map[string]string{"name": name})
}

// NewRepo is what CreateRepo creates: the zero values of the optional fields are the
// server's defaults (a private repo with git content).
type NewRepo struct {
	Name       string `json:"name"`
	Visibility string `json:"visibility,omitempty"` // "private" (the default), "internal", "public"
	Secret     bool   `json:"secret,omitempty"`     // files for pipelines to import, no git content
}

// Repo is a repo as its answer shows it.
type Repo struct {
	ID         int64  `json:"id"`
	Org        string `json:"org"`
	Name       string `json:"name"`
	Visibility string `json:"visibility"`
	Secret     bool   `json:"secret"`
	CloneURL   string `json:"clone_url"`
	// ForkOf is the repo this one was forked from (org/name), in answers about one repo.
	ForkOf string `json:"fork_of,omitempty"`
}

// ForkRepo forks org/repo into team into, named name ("" keeps the name) (POST
// /repos/{org}/{repo}/forks).
func (c *Client) ForkRepo(ctx context.Context, org, repo, into, name string) (*Repo, error) {
	body := map[string]string{"org": into}
	if name != "" {
		body["name"] = name
	}
	return call[Repo](ctx, c, http.MethodPost, Path("repos", org, repo, "forks"), body)
}

// DeleteRepo deletes a repo and its git directory (DELETE /repos/{org}/{repo}).
func (c *Client) DeleteRepo(ctx context.Context, org, repo string) error {
	return c.Do(ctx, http.MethodDelete, Path("repos", org, repo), nil, nil)
}

// CreateRepo creates a repo in the org (POST /orgs/{org}/repos).
func (c *Client) CreateRepo(ctx context.Context, org string, r NewRepo) (*Repo, error) {
	return call[Repo](ctx, c, http.MethodPost, Path("orgs", org, "repos"), r)
}

// Workspace is a cloud workspace (GET /workspaces/{id}, and the items of the team's list,
// GET /orgs/{org}/workspaces). The fields its agent reports (Connections, IdleDeadline, IDE)
// are nil while it is not ready; SavedWork is empty in the list.
type Workspace struct {
	ID                 int64         `json:"id"`
	Org                string        `json:"org"`
	Repo               string        `json:"repo"`
	Branch             string        `json:"branch"`
	BuildNumber        int64         `json:"build_number"`
	PipelineName       string        `json:"pipeline_name"`
	Status             string        `json:"status"` // the pipeline's
	State              string        `json:"state"`  // queued, starting, ready, stopping, stopped, failed
	Reason             string        `json:"reason"`
	GPUs               int           `json:"gpus"`
	StartedAt          *time.Time    `json:"started_at"`
	ReadyAt            *time.Time    `json:"ready_at"`
	FinishedAt         *time.Time    `json:"finished_at"` // billed up to here
	CoreSeconds        int64         `json:"core_seconds"`
	Cost               string        `json:"cost"`
	Connections        *int          `json:"connections"`
	IdleDeadline       *time.Time    `json:"idle_deadline"`
	IDE                *WorkspaceIDE `json:"ide"`
	PreviewURLTemplate string        `json:"preview_url_template"`
	SavedWork          []SavedWork   `json:"saved_work"`
}

// WorkspaceIDE is how a workspace's editor is reached: its kind, and its URL or the reason
// there is none.
type WorkspaceIDE struct {
	Kind   string  `json:"kind"`
	Reason string  `json:"reason"`
	URL    *string `json:"url"`
}

// SavedWork is the uncommitted work of an earlier workspace of the branch, saved when it
// stopped: a ref of the repo that RestoreWorkspace puts back.
type SavedWork struct {
	Ref        string `json:"ref"`
	PipelineID int64  `json:"pipeline_id"`
}

// GetWorkspace reads a workspace (GET /workspaces/{id}; its id is its pipeline's).
func (c *Client) GetWorkspace(ctx context.Context, id int64) (*Workspace, error) {
	return call[Workspace](ctx, c, http.MethodGet, Path("workspaces", strconv.FormatInt(id, 10)), nil)
}

// WorkspaceList is the team's workspaces, newest first (at most 200, one page).
type WorkspaceList struct {
	Items []Workspace `json:"items"`
}

// Workspaces lists the team's active workspaces, or with all the ended ones too.
func (c *Client) Workspaces(ctx context.Context, org string, all bool) ([]Workspace, error) {
	path := Path("orgs", org, "workspaces")
	if all {
		path += "?" + url.Values{"all": {"true"}}.Encode()
	}
	var l WorkspaceList
	if err := c.Do(ctx, http.MethodGet, path, nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Build is a build as GET /repos/{org}/{repo}/builds/{number} and the routes that start one
// (opening workspaces, running a build) answer it: its number, event, commit and status, its
// pipelines with their stages and jobs, and the error of a file that does not compile.
type Build struct {
	Number    int64           `json:"number"`
	Event     string          `json:"event"`
	Branch    string          `json:"branch"`
	Commit    string          `json:"commit"`
	Status    string          `json:"status"`
	Waiting   bool            `json:"waiting"` // nothing runs, and a pipeline is held back by blockers
	Pipelines []BuildPipeline `json:"pipelines"`
	Error     *FileError      `json:"error"`
	Parent    *BuildLink      `json:"parent"`   // the build whose pipeline started this one (a single build only)
	Children  []BuildLink     `json:"children"` // the builds its pipelines started (a single build only)
	// PipelineCount is how many pipelines the build has; Pipelines holds the first 100, and
	// PipelinesNextCursor, when it has more, is the cursor of BuildPipelines for the rest.
	PipelineCount       int64        `json:"pipeline_count"`
	PipelinesNextCursor string       `json:"pipelines_next_cursor"`
	Diagnostics         []Diagnostic `json:"diagnostics"` // what linting the file found (a single build only)
}

// Diagnostic is one finding of linting and planning a build's file, as `nimbus lint` prints it.
type Diagnostic struct {
	Severity string `json:"severity"` // error, warning or info
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Message  string `json:"message"`
}

// BuildLink names another build, maybe of another repo: a build's parent or child.
type BuildLink struct {
	Repo   string `json:"repo"` // org/repo
	Number int64  `json:"number"`
}

// BuildPipeline is a pipeline of a Build.
type BuildPipeline struct {
	ID             int64         `json:"id"`
	Name           string        `json:"name"`
	Status         string        `json:"status"`
	Reason         string        `json:"reason"` // for people: why it still waits, or why it ended so
	Waiting        bool          `json:"waiting"`
	Blockers       []Blocker     `json:"blockers"`
	RunnerTag      string        `json:"runner_tag"`
	CPUs           int           `json:"cpus"`
	StartedAt      *time.Time    `json:"started_at"`  // its lease
	FinishedAt     *time.Time    `json:"finished_at"` // its final report: billed up to here
	CoreSeconds    int64         `json:"core_seconds"`
	Cost           string        `json:"cost"`
	WrittenOff     string        `json:"written_off"`  // the part of Cost nobody paid, once settled
	UncoveredMs    *int64        `json:"uncovered_ms"` // run past its last paid window; nil until settled
	AwaitedMs      *int64        `json:"awaited_ms"`   // time in cnb:await jobs (a single build only)
	Stages         []BuildStage  `json:"stages"`
	Workspace      bool          `json:"workspace"`
	ReadyAt        *time.Time    `json:"ready_at"` // when a workspace could be entered
	WorkspaceState *string       `json:"workspace_state"`
	Host           *PipelineHost `json:"host"` // the agent that leased it; nil if none did
}

// PipelineHost is the agent a pipeline ran on, as its record keeps it.
type PipelineHost struct {
	Name     string `json:"name"`
	Executor string `json:"executor"`
}

// Blocker is something a queued pipeline waits for, and what fixes it.
type Blocker struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Remedy  string `json:"remedy"`
}

// BuildStage is a stage of a BuildPipeline (only a single build carries them, not lists).
type BuildStage struct {
	Name string     `json:"name"`
	Jobs []BuildJob `json:"jobs"`
}

// BuildJob is a job of a BuildStage.
type BuildJob struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"` // running once the server knows its user code started
}

// FileError is where a build's file fails to compile.
type FileError struct {
	Message string `json:"message"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
}

// BuildList is a page of a repo's builds, newest first; their pipelines carry no stages.
type BuildList struct {
	Items []Build `json:"items"`
}

// Builds lists the repo's newest builds (GET /repos/{org}/{repo}/builds): up to limit of them,
// or the server's default page when limit is 0.
func (c *Client) Builds(ctx context.Context, org, repo string, limit int) ([]Build, error) {
	path := Path("repos", org, repo, "builds")
	if limit > 0 {
		path += "?" + url.Values{"limit": {strconv.Itoa(limit)}}.Encode()
	}
	var l BuildList
	if err := c.Do(ctx, http.MethodGet, path, nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// CancelBuild asks a build's running and queued pipelines to stop
// (POST /repos/{org}/{repo}/builds/{number}/cancel): the answer comes before its agents have
// stopped them.
func (c *Client) CancelBuild(ctx context.Context, org, repo string, number int64) error {
	return c.Do(ctx, http.MethodPost, Path("repos", org, repo, "builds", strconv.FormatInt(number, 10), "cancel"), nil, nil)
}

// RerunExact starts a new build of a build's commit with its recorded images, by digest
// (POST /repos/{org}/{repo}/builds/{number}/rerun-exact), and returns it.
func (c *Client) RerunExact(ctx context.Context, org, repo string, number int64) (*Build, error) {
	return call[Build](ctx, c, http.MethodPost, Path("repos", org, repo, "builds", strconv.FormatInt(number, 10), "rerun-exact"), nil)
}

// GetBuild reads a build with its first 100 pipelines, their stages and jobs
// (GET /repos/{org}/{repo}/builds/{number}).
func (c *Client) GetBuild(ctx context.Context, org, repo string, number int64) (*Build, error) {
	return call[Build](ctx, c, http.MethodGet, Path("repos", org, repo, "builds", strconv.FormatInt(number, 10)), nil)
}

// PipelineList is a page of a build's pipelines, each with its stages and jobs.
type PipelineList struct {
	Items      []BuildPipeline `json:"items"`
	NextCursor string          `json:"next_cursor"` // "" on the last page
}

// BuildPipelines reads a page of up to limit of a build's pipelines after cursor ("" for the
// first page; a build's PipelinesNextCursor for the page after its own)
// (GET /repos/{org}/{repo}/builds/{number}/pipelines).
func (c *Client) BuildPipelines(ctx context.Context, org, repo string, number int64, limit int, cursor string) (*PipelineList, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := Path("repos", org, repo, "builds", strconv.FormatInt(number, 10), "pipelines") + "?" + q.Encode()
	return call[PipelineList](ctx, c, http.MethodGet, path, nil)
}

// OpenWorkspaces fires the vscode event on the head of branch (the default branch when empty):
// the build whose workspace pipelines are the workspaces (POST /repos/{org}/{repo}/workspaces).
func (c *Client) OpenWorkspaces(ctx context.Context, org, repo, branch string) (*Build, error) {
	body := map[string]string{}
	if branch != "" {
		body["branch"] = branch
	}
	return call[Build](ctx, c, http.MethodPost, Path("repos", org, repo, "workspaces"), body)
}

// Restored is what RestoreWorkspace put back: the files of the saved work, relative to the
// workspace's tree.
type Restored struct {
	Files []string `json:"files"`
}

// RestoreWorkspace puts the saved work at ref (one of the workspace's SavedWork) back into a
// ready workspace's tree (POST /workspaces/{id}/restore).
func (c *Client) RestoreWorkspace(ctx context.Context, id int64, ref string) (*Restored, error) {
	return call[Restored](ctx, c, http.MethodPost, Path("workspaces", strconv.FormatInt(id, 10), "restore"), map[string]string{"ref": ref})
}

// PreviewToken is a short-lived credential of one port of a workspace: send Token as the
// X-Nimbus-Preview-Token header to URL, for clients that keep no cookies.
type PreviewToken struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// NewPreviewToken issues a preview credential of a workspace's port
// (POST /workspaces/{id}/preview/{port}/token).
func (c *Client) NewPreviewToken(ctx context.Context, id int64, port int) (*PreviewToken, error) {
	path := Path("workspaces", strconv.FormatInt(id, 10), "preview", strconv.Itoa(port), "token")
	return call[PreviewToken](ctx, c, http.MethodPost, path, nil)
}

// StopWorkspace stops a workspace gracefully (POST /workspaces/{id}/stop): its endStages run
// and its uncommitted work is saved.
func (c *Client) StopWorkspace(ctx context.Context, id int64) error {
	return c.Do(ctx, http.MethodPost, Path("workspaces", strconv.FormatInt(id, 10), "stop"), nil, nil)
}

// ArtifactVersion is a version of a model package with its files
// (GET /repos/{org}/{repo}/artifacts/{package}/{version}; "latest" names the newest).
type ArtifactVersion struct {
	Version     string         `json:"version"`
	Build       *ArtifactBuild `json:"build"`        // nil when a person published it
	BuildScoped bool           `json:"build_scoped"` // a hand-off between a build's pipelines
	Files       []ArtifactFile `json:"files"`        // not in lists
}

// ArtifactVersionList is a page of a package's versions, newest first.
type ArtifactVersionList struct {
	Items []ArtifactVersion `json:"items"`
}

// ArtifactVersions lists a package's newest versions, without their files
// (GET /repos/{org}/{repo}/artifacts/{package}; one page).
func (c *Client) ArtifactVersions(ctx context.Context, org, repo, pkg string) ([]ArtifactVersion, error) {
	var l ArtifactVersionList
	if err := c.Do(ctx, http.MethodGet, Path("repos", org, repo, "artifacts", pkg), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ArtifactBuild is the build whose pipeline published an ArtifactVersion.
type ArtifactBuild struct {
	Number int64  `json:"number"`
	Commit string `json:"commit"`
}

// ArtifactFile is a file of an ArtifactVersion: its name, size and "sha256:<hex>" digest.
type ArtifactFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// Published is the answer to a model file's upload (PUT …/{version}/{file}): 201 when it was
// stored, 200 when the same bytes were there already.
type Published struct {
	DownloadURL string `json:"download_url"`
}

// Release is a tag's release: its title and notes, the build that published it, and its files.
type Release struct {
	Tag    string         `json:"tag"`
	Title  string         `json:"title"`
	Notes  string         `json:"notes"`
	Commit string         `json:"commit"`
	Build  *ArtifactBuild `json:"build"`
	Files  []ArtifactFile `json:"files"`
}

// GetRelease reads the release of a tag (GET /repos/{org}/{repo}/releases/{tag}).
func (c *Client) GetRelease(ctx context.Context, org, repo, tag string) (*Release, error) {
	return call[Release](ctx, c, http.MethodGet, Path("repos", org, repo, "releases", tag), nil)
}

// SetSecret creates or replaces a repo's secret (PUT /repos/{org}/{repo}/secrets/{name}):
// pipelines read it as an env var, and their logs mask it.
func (c *Client) SetSecret(ctx context.Context, org, repo, name, value string) error {
	return c.Do(ctx, http.MethodPut, Path("repos", org, repo, "secrets", name), map[string]string{"value": value}, nil)
}

// SecretFile is a file of a secret repository with its content (GET …/secret-files/{path}).
type SecretFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Content string `json:"content"`
}

// secretFilePath is the API path of a secret file: its slashes stay separators.
func secretFilePath(org, repo, file string) string {
	return Path(append([]string{"repos", org, repo, "secret-files"}, strings.Split(file, "/")...)...)
}

// PutSecretFile creates or replaces a file of a secret repository
// (PUT /repos/{org}/{repo}/secret-files/{path}). Content that does not parse as the env file
// its name says is an *Error with Status 422, and the stored version stays.
func (c *Client) PutSecretFile(ctx context.Context, org, repo, file, content string) error {
	return c.Do(ctx, http.MethodPut, secretFilePath(org, repo, file), map[string]string{"content": content}, nil)
}

// GetSecretFile reads a file of a secret repository with its content.
func (c *Client) GetSecretFile(ctx context.Context, org, repo, file string) (*SecretFile, error) {
	return call[SecretFile](ctx, c, http.MethodGet, secretFilePath(org, repo, file), nil)
}

// ArtifactUse is a file a pipeline pushed or pulled: which package and version, and its digest.
type ArtifactUse struct {
	Package string `json:"package"`
	Version string `json:"version"`
	File    string `json:"file"`
	Digest  string `json:"digest"` // "sha256:<hex>"
}

// ArtifactUses is what a pipeline moved, oldest first.
type ArtifactUses struct {
	Pushed []ArtifactUse `json:"pushed"`
	Pulled []ArtifactUse `json:"pulled"`
}

// PipelineArtifacts reads what a pipeline pushed and pulled
// (GET /repos/{org}/{repo}/pipelines/{id}/artifacts).
func (c *Client) PipelineArtifacts(ctx context.Context, org, repo string, pipeline int64) (*ArtifactUses, error) {
	return call[ArtifactUses](ctx, c, http.MethodGet, Path("repos", org, repo, "pipelines", strconv.FormatInt(pipeline, 10), "artifacts"), nil)
}

// PublishWebhook is the URL a repo tells of each new model version; Secret, which signs the
// deliveries, is only in the answer to SetPublishWebhook.
type PublishWebhook struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// SetPublishWebhook sets the repo's publish webhook (PUT /repos/{org}/{repo}/webhooks/publish).
func (c *Client) SetPublishWebhook(ctx context.Context, org, repo, hookURL string) (*PublishWebhook, error) {
	return call[PublishWebhook](ctx, c, http.MethodPut, Path("repos", org, repo, "webhooks", "publish"), map[string]string{"url": hookURL})
}

// ArtifactPath is the API path of a package's version, or of one of its files when file is
// given.
func ArtifactPath(org, repo, pkg, version string, file ...string) string {
	return Path(append([]string{"repos", org, repo, "artifacts", pkg, version}, file...)...)
}

// ArtifactVersion reads a version of a package and the list of its files.
func (c *Client) ArtifactVersion(ctx context.Context, org, repo, pkg, version string) (*ArtifactVersion, error) {
	return call[ArtifactVersion](ctx, c, http.MethodGet, ArtifactPath(org, repo, pkg, version), nil)
}

// Billing is a team's account (GET /orgs/{org}/billing). Amounts are decimal strings in the
// account's currency ("12.3400"), as the API gives them, so that no float rounds them.
type Billing struct {
	Balance   string    `json:"balance"`
	Frozen    string    `json:"frozen"` // held for running pipelines' current windows
	FreeQuota FreeQuota `json:"free_quota"`
}

// FreeQuota is the builds' free CPU quota of the month.
type FreeQuota struct {
	TotalCoreSeconds int64 `json:"total_core_seconds"`
	UsedCoreSeconds  int64 `json:"used_core_seconds"`
}

// GetBilling reads the team's account.
func (c *Client) GetBilling(ctx context.Context, org string) (*Billing, error) {
	return call[Billing](ctx, c, http.MethodGet, Path("orgs", org, "billing"), nil)
}

// LedgerEntry is a transaction of a team's account: its balance and frozen changes add up to
// the account's balance and frozen amount.
type LedgerEntry struct {
	Kind          string `json:"kind"` // topup, grant, refund, freeze, settle, release
	Amount        string `json:"amount"`
	BalanceChange string `json:"balance_change"`
	FrozenChange  string `json:"frozen_change"`
	PipelineID    *int64 `json:"pipeline_id"` // the pipeline a freeze, settle or release is for
}

// LedgerPage is a page of a team's ledger, newest first; NextCursor is "" on the last page.
type LedgerPage struct {
	Items      []LedgerEntry `json:"items"`
	NextCursor string        `json:"next_cursor"`
}

// Ledger reads a page of the team's ledger (GET /orgs/{org}/billing/ledger): up to limit
// entries after cursor ("" for the first page).
func (c *Client) Ledger(ctx context.Context, org string, limit int, cursor string) (*LedgerPage, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return call[LedgerPage](ctx, c, http.MethodGet, Path("orgs", org, "billing", "ledger")+"?"+q.Encode(), nil)
}

// GrantCredits credits a team's account (POST /admin/orgs/{org}/credits; platform admins
// only): amount is a decimal string ("10.00"), note one line recorded with the grant.
func (c *Client) GrantCredits(ctx context.Context, org, amount, note string) (*LedgerEntry, error) {
	return call[LedgerEntry](ctx, c, http.MethodPost, Path("admin", "orgs", org, "credits"), map[string]string{"amount": amount, "note": note})
}

// call is Do for the calls whose answer is one value: it returns it, or Do's error.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	var out T
	if err := c.Do(ctx, method, path, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
