package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/server/openapitest"
)

// client is the API's Go client (backend/apiclient, the one the nimbus CLI uses) in a test:
// its calls fail the test instead of returning an error, and every answer it gets is checked
// against openapi.yaml.
type client struct {
	t   testing.TB
	api *apiclient.Client
}

// newClient talks to the API as a browser would: a cookie jar, and the CSRF header once signup
// has answered one.
func newClient(t testing.TB, base string) *client {
	return newAPIClient(t, base, apiclient.WithSession())
}

// tokenClient talks to the API with a bearer token (personal, deploy).
func tokenClient(t testing.TB, base, token string) *client {
	return newAPIClient(t, base, apiclient.WithToken(token))
}

func newAPIClient(t testing.TB, base string, auth apiclient.Option) *client {
	contract, err := openapitest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	// Every answer the client gets is checked against the OpenAPI document: an undeclared status,
	// field or type fails the test that made the call.
	tr := contract.Transport(nil, func(err error) { t.Errorf("response does not match openapi.yaml: %v", err) })
	h := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	return &client{t: t, api: apiclient.New(base, apiclient.WithHTTPClient(h), auth)}
}

// do sends a JSON request and decodes the JSON answer, whatever its status, into out (when
// non-nil); it returns the status, for the tests that look at refusals.
func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	status, raw, err := c.api.Raw(c.t.Context(), method, path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %d %q: %v", method, path, status, raw, err)
		}
	}
	return status
}

// must is do that fails the test unless the status is want.
func (c *client) must(want int, method, path string, body any, out any) {
	c.t.Helper()
	status, raw, err := c.api.Raw(c.t.Context(), method, path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %q: %v", method, path, raw, err)
		}
	}
}

// check fails the test on an error of a typed call.
func (c *client) check(what string, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// signup creates an account and keeps its session.
func (c *client) signup(username string) {
	c.t.Helper()
	_, err := c.api.Signup(c.t.Context(), username+"@example.com", username, "a long enough passphrase")
	c.check("signup "+username, err)
}

// newToken creates a personal access token of the client's user and returns it.
func (c *client) newToken(name string, scopes ...string) string {
	c.t.Helper()
	tok, err := c.api.CreateToken(c.t.Context(), name, scopes...)
	c.check("new token "+name, err)
	return tok.Token
}

// deployToken creates a read-only deploy token of a repo.
func (c *client) deployToken(org, repo, name string) *apiclient.Token {
	c.t.Helper()
	tok, err := c.api.CreateDeployToken(c.t.Context(), org, repo, name)
	c.check("deploy token "+name, err)
	return tok
}

// createOrg creates a team owned by the client's user.
func (c *client) createOrg(name string) {
	c.t.Helper()
	_, err := c.api.CreateOrg(c.t.Context(), name)
	c.check("create org "+name, err)
}

// createRepo creates a repo in the org.
func (c *client) createRepo(org string, r apiclient.NewRepo) *apiclient.Repo {
	c.t.Helper()
	repo, err := c.api.CreateRepo(c.t.Context(), org, r)
	c.check("create repo "+org+"/"+r.Name, err)
	return repo
}

// build reads a build with its pipelines, stages and jobs.
func (c *client) build(org, repo string, number int64) apiclient.Build {
	c.t.Helper()
	b, err := c.api.GetBuild(c.t.Context(), org, repo, number)
	c.check("build "+org+"/"+repo, err)
	return *b
}

// openWorkspaces fires the vscode event on the branch: the build whose pipelines are the
// workspaces.
func (c *client) openWorkspaces(org, repo, branch string) apiclient.Build {
	c.t.Helper()
	b, err := c.api.OpenWorkspaces(c.t.Context(), org, repo, branch)
	c.check("open workspaces on "+org+"/"+repo+" "+branch, err)
	return *b
}

// workspace reads a workspace.
func (c *client) workspace(id int64) apiclient.Workspace {
	c.t.Helper()
	v, err := c.api.GetWorkspace(c.t.Context(), id)
	c.check("workspace "+itoa(id), err)
	return *v
}

// workspaces lists the team's active workspaces.
func (c *client) workspaces(org string) []apiclient.Workspace {
	c.t.Helper()
	l, err := c.api.Workspaces(c.t.Context(), org, false)
	c.check("workspaces of "+org, err)
	return l
}

// stopWorkspace stops a workspace gracefully (its endStages run, its work is saved).
func (c *client) stopWorkspace(id int64) {
	c.t.Helper()
	c.check("stop workspace "+itoa(id), c.api.StopWorkspace(c.t.Context(), id))
}

// billing reads the team's account.
func (c *client) billing(org string) apiclient.Billing {
	c.t.Helper()
	b, err := c.api.GetBilling(c.t.Context(), org)
	c.check("billing of "+org, err)
	return *b
}

// ledgerPage reads up to 100 entries of the team's ledger after cursor ("" for the newest).
func (c *client) ledgerPage(org, cursor string) apiclient.LedgerPage {
	c.t.Helper()
	p, err := c.api.Ledger(c.t.Context(), org, 100, cursor)
	c.check("ledger of "+org, err)
	return *p
}

// grantCredits credits the team's account (the client's user is a platform admin).
func (c *client) grantCredits(org, amount, note string) {
	c.t.Helper()
	_, err := c.api.GrantCredits(c.t.Context(), org, amount, note)
	c.check("grant "+amount+" to "+org, err)
}

// builds lists the repo's newest builds (limit 0: the server's default page).
func (c *client) builds(org, repo string, limit int) []apiclient.Build {
	c.t.Helper()
	l, err := c.api.Builds(c.t.Context(), org, repo, limit)
	c.check("builds of "+org+"/"+repo, err)
	return l
}

// artifactVersion reads a version of a package ("latest" names the newest) and its files.
func (c *client) artifactVersion(org, repo, pkg, version string) apiclient.ArtifactVersion {
	c.t.Helper()
	v, err := c.api.ArtifactVersion(c.t.Context(), org, repo, pkg, version)
	c.check("version "+version+" of "+pkg, err)
	return *v
}

// restoreWorkspace puts saved work back into a ready workspace and returns its files.
func (c *client) restoreWorkspace(id int64, ref string) []string {
	c.t.Helper()
	r, err := c.api.RestoreWorkspace(c.t.Context(), id, ref)
	c.check("restore "+ref+" into workspace "+itoa(id), err)
	return r.Files
}

// previewToken issues a preview credential of a workspace's port.
func (c *client) previewToken(id int64, port int) apiclient.PreviewToken {
	c.t.Helper()
	t, err := c.api.NewPreviewToken(c.t.Context(), id, port)
	c.check("preview token of workspace "+itoa(id), err)
	return *t
}

// release reads the release of a tag.
func (c *client) release(org, repo, tag string) apiclient.Release {
	c.t.Helper()
	r, err := c.api.GetRelease(c.t.Context(), org, repo, tag)
	c.check("release "+tag, err)
	return *r
}

// cancelBuild asks a build's pipelines to stop.
func (c *client) cancelBuild(org, repo string, number int64) {
	c.t.Helper()
	c.check("cancel build "+itoa(number), c.api.CancelBuild(c.t.Context(), org, repo, number))
}

// rerunExact starts a new build of a build's commit with its recorded images and returns it.
func (c *client) rerunExact(org, repo string, number int64) apiclient.Build {
	c.t.Helper()
	b, err := c.api.RerunExact(c.t.Context(), org, repo, number)
	c.check("rerun build "+itoa(number)+" exactly", err)
	return *b
}

// putSecretFile writes a file of a secret repository.
func (c *client) putSecretFile(org, repo, file, content string) {
	c.t.Helper()
	c.check("put secret file "+file, c.api.PutSecretFile(c.t.Context(), org, repo, file, content))
}

// setSecret creates or replaces a repo's secret.
func (c *client) setSecret(org, repo, name, value string) {
	c.t.Helper()
	c.check("set secret "+name, c.api.SetSecret(c.t.Context(), org, repo, name, value))
}

// artifactVersions lists a package's newest versions.
func (c *client) artifactVersions(org, repo, pkg string) []apiclient.ArtifactVersion {
	c.t.Helper()
	l, err := c.api.ArtifactVersions(c.t.Context(), org, repo, pkg)
	c.check("versions of "+pkg, err)
	return l
}

// pipelineArtifacts reads what a pipeline pushed and pulled.
func (c *client) pipelineArtifacts(org, repo string, pipeline int64) apiclient.ArtifactUses {
	c.t.Helper()
	u, err := c.api.PipelineArtifacts(c.t.Context(), org, repo, pipeline)
	c.check("artifacts of pipeline "+itoa(pipeline), err)
	return *u
}

// setPublishWebhook sets the URL the repo tells of each new model version and returns the
// webhook with the secret that signs the deliveries.
func (c *client) setPublishWebhook(org, repo, hookURL string) apiclient.PublishWebhook {
	c.t.Helper()
	h, err := c.api.SetPublishWebhook(c.t.Context(), org, repo, hookURL)
	c.check("set the publish webhook", err)
	return *h
}

// gitRun runs the real git client in dir with a throwaway HOME and no prompts.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=E2E", "-c", "user.email=e2e@example.com",
		"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
