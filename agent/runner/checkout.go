package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/backoff"
)

// DefaultMount is where job containers see the checkout when the plan does not say
// (CNB_BUILD_WORKSPACE).
const DefaultMount = "/workspace"

// CheckoutsDir is the folder of the agent's work dir that holds one checkout per lease. Its
// name on disk is older than the word "checkout" in the code and stays, so that an upgraded
// agent still finds, and removes, what an older one left there.
const CheckoutsDir = "workspaces"

// prepareCheckout creates an empty checkout for the lease and decides where jobs see it.
func (x *run) prepareCheckout() error {
	x.checkout = filepath.Join(x.cfg.WorkDir, CheckoutsDir, x.lease.ID)
	// A leftover of an earlier attempt at the same lease must not leak into this one.
	if err := os.RemoveAll(x.checkout); err != nil {
		return fmt.Errorf("workspace: remove a leftover: %w", err)
	}
	if err := os.MkdirAll(x.checkout, 0o755); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	x.mount = x.lease.Plan.Builtins["CNB_BUILD_WORKSPACE"]
	if x.mount == "" {
		x.mount = DefaultMount
	}
	if x.cfg.Executor.Name() == executor.ModeShell {
		// Host processes have no mount: they run in the checkout itself.
		x.mount = x.checkout
	}
	return nil
}

// clone checks lease.Commit of lease.CloneURL out into the checkout: an empty repository, a
// fetch of that one commit at depth 1, a detached checkout. The job token authenticates as HTTP
// Basic in a header that git reads from its environment (GIT_CONFIG_COUNT), scoped to the
// clone URL's origin: it appears in no argument list, no URL, no file of the checkout and no
// log, and a submodule on another host never sees it.
func (x *run) clone(ctx context.Context) error {
	p := &x.lease.Plan
	if !p.Git.Enable {
		return nil
	}
	if x.lease.CloneURL == "" {
		return fmt.Errorf("clone: the lease has no clone URL")
	}
	u, err := url.Parse(x.lease.CloneURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("clone: bad clone URL: %w", err)
	}
	target := x.lease.Commit
	if target == "" {
		target = p.Ref
	}
	if target == "" {
		target = "HEAD"
	}
	env := x.gitEnv(u)
	steps := [][]string{
		{"init", "--quiet"},
		{"remote", "add", "origin", x.lease.CloneURL},
		{"fetch", "--quiet", "--no-tags", "--depth=1", "origin", target},
		{"checkout", "--quiet", "--force", "--detach", "FETCH_HEAD"},
	}
	if p.Git.Submodules {
		steps = append(steps, []string{"submodule", "update", "--quiet", "--init", "--recursive", "--depth=1"})
	}
	for _, args := range steps {
		if err := x.gitRetrying(ctx, env, args...); err != nil {
			return fmt.Errorf("clone %s at %s: %w", x.lease.CloneURL, target, err)
		}
	}
	if !p.Git.LFS {
		return nil
	}
	// git.lfs is on by default, so most plans ask for it: only a commit that has LFS files needs
	// git-lfs, and only then is its absence worth a warning.
	attrs := x.lfsAttributes(ctx, env)
	if attrs == "" {
		return nil
	}
	if x.git(ctx, env, "lfs", "version") != nil {
		x.log.Warn("the commit uses git LFS (filter=lfs in .gitattributes) but git-lfs is not installed on this host; LFS files stay pointers",
			"gitattributes", attrs)
		return nil
	}
	if err := x.gitRetrying(ctx, env, "lfs", "pull"); err != nil {
		return fmt.Errorf("clone %s at %s: %w", x.lease.CloneURL, target, err)
	}
	return nil
}

// gitEnv is the environment of the agent's git commands for the clone URL u: no prompts, no
// system or global config, and the job token as HTTP Basic in a header scoped to u's origin.
func (x *run) gitEnv(u *url.URL) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
	}
	if x.lease.JobToken != "" {
		user := x.lease.Env["CNB_TOKEN_USER_NAME"]
		if user == "" {
			user = "cnb"
		}
		cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + x.lease.JobToken))
		origin := u.Scheme + "://" + u.Host + "/"
		env = append(env, "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http."+origin+".extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+cred)
	}
	return env
}

// Bounds on reading .gitattributes files: a checkout with more, or larger, ones is not what
// they are for, and the clone must not stall on it.
const (
	maxAttributeFiles = 1000
	maxAttributeBytes = 1 << 20
)

// lfsAttributes returns the path of the first .gitattributes of the checkout (the root one or a
// nested one tracked by the commit) that assigns filter=lfs, or "" when none does.
func (x *run) lfsAttributes(ctx context.Context, env []string) string {
	files := []string{".gitattributes"}
	if out, err := x.gitOutput(ctx, env, "ls-files", "-z", "--", ":(glob)**/.gitattributes"); err == nil {
		for _, f := range strings.Split(out, "\x00") {
			if f != "" && f != ".gitattributes" {
				files = append(files, f)
			}
		}
	} else {
		x.log.Warn("listing the checkout's .gitattributes failed; only the root one is read", "err", err)
	}
	for i, f := range files {
		if i == maxAttributeFiles {
			break
		}
		fh, err := os.Open(filepath.Join(x.checkout, filepath.FromSlash(f)))
		if err != nil {
			continue // the root one is optional
		}
		b, _ := io.ReadAll(io.LimitReader(fh, maxAttributeBytes))
		fh.Close()
		if usesLFS(string(b)) {
			return f
		}
	}
	return ""
}

// usesLFS says whether a .gitattributes assigns filter=lfs to some pattern (comments and macro
// definitions aside).
func usesLFS(attrs string) bool {
	for _, line := range strings.Split(attrs, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], "[attr]") {
			continue
		}
		for _, a := range fields[1:] {
			if a == "filter=lfs" {
				return true
			}
		}
	}
	return false
}

// transientGit recognises git's complaints about the network or the server, as opposed to a
// missing commit or a refused token: a server restarting under a running pipeline must not
// fail its clone.
var transientGit = []string{"Failed to connect", "Couldn't connect", "Connection refused", "Connection reset",
	"Could not resolve host", "timed out", "returned error: 50", "early EOF", "RPC failed", "unexpected disconnect"}

// gitRetrying is git with up to five attempts (1, 2, 4, 8 s apart) for transient failures.
func (x *run) gitRetrying(ctx context.Context, env []string, args ...string) error {
	policy := backoff.Policy{Initial: time.Second}
	for attempt := 1; ; attempt++ {
		err := x.git(ctx, env, args...)
		if err == nil || attempt == 5 || !isTransientGit(err) {
			return err
		}
		x.log.Warn("git failed, retrying", "command", args[0], "attempt", attempt, "err", err)
		if backoff.Sleep(ctx, policy.After(attempt)) != nil {
			return err
		}
	}
}

func isTransientGit(err error) bool {
	for _, s := range transientGit {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// git runs one git command in the checkout; its output is only returned with a failure, and
// masked.
func (x *run) git(ctx context.Context, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, x.cfg.GitPath, args...)
	cmd.Dir = x.checkout
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, maskString(strings.TrimSpace(out.String()), x.secretList()))
	}
	return nil
}

// gitOutput runs one git command in the checkout and returns its standard output.
func (x *run) gitOutput(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, x.cfg.GitPath, args...)
	cmd.Dir = x.checkout
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", args[0], err, maskString(strings.TrimSpace(errOut.String()), x.secretList()))
	}
	return out.String(), nil
}
