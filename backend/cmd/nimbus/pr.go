package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

func prCommand() command {
	return command{summary: "open, list, check out and merge pull requests", run: runPR}
}

const prUsage = `Usage: nimbus pr create [flags] ORG/REPO --source BRANCH [--from FORK_ORG/FORK_REPO] [--target BRANCH] --title TITLE [--body TEXT]
       nimbus pr list [flags] ORG/REPO [--state open|closed|merged|all] [--author USER] [--reviewer USER]
       nimbus pr checkout [flags] ORG/REPO NUMBER [-C DIR]
       nimbus pr merge [flags] ORG/REPO NUMBER [--mode merge|squash|rebase|auto] [--delete-branch]
       nimbus pr comment [flags] [ORG/REPO NUMBER] (--body TEXT | --body-file FILE) [--path FILE --line N]
       nimbus pr metrics [flags] [ORG/REPO NUMBER] [--fail-worse NAME=LIMIT,…]

create opens a pull request of a branch into another (the repository's default branch unless
--target says); with --from the branch is in your fork of ORG/REPO. list prints a repository's
requests with their check state, merge merges one as you. checkout runs git
in the work tree DIR (default: the current directory): it fetches the request's commits (refs/pull/NUMBER/head) from the
server and checks them out on the branch pr-NUMBER, with the token sent as a header, never
written into the repository's config. comment posts a comment (Markdown; --body-file - reads
standard input), on a line of a changed file with --path and --line; inside a pull_request
pipeline ORG/REPO and NUMBER default to the pipeline's own (CNB_REPO_SLUG,
CNB_PULL_REQUEST_IID), so a job can write its report back to the request. metrics prints each
metric the request reported against its target's latest successful build; with --fail-worse it
exits 1 when a named metric got worse by more than its LIMIT, absolute (loss=0.02) or relative
to the target's value (accuracy=1%); * names every metric (*=0: no regression at all). A later
stage of a pull_request pipeline that runs it fails the check when the model regresses; the
limits live in the .cnb.yml.

The token is a personal token (or, inside a pipeline, CNB_TOKEN).`

type prClient struct {
	server, token string
	api           *apiclient.Client
}

func runPR(ctx context.Context, e env, args []string) int {
	verb, code, ok := verbOf(e, args, prUsage, "create", "list", "checkout", "merge", "comment", "metrics")
	if !ok {
		return code
	}
	c := &prClient{}
	var in apiclient.NewPull
	var merge apiclient.PullMerge
	var note apiclient.NewPullComment
	var bodyFile, failWorse string
	filter, dir := apiclient.PullFilter{State: "open"}, "."
	fs := envflag.New("pr "+verb, prUsage)
	serverFlags(fs, &c.server, &c.token, "a personal token (default: CNB_TOKEN inside a pipeline)")
	switch verb {
	case "create":
		fs.String(&in.SourceBranch, "source", "", "", "the branch to merge (required)")
		fs.String(&in.SourceRepo, "from", "", "", "the fork the branch is in, ORG/REPO (default: ORG/REPO itself)")
		fs.String(&in.TargetBranch, "target", "", "", "the branch to merge into (default: the repository's default branch)")
		fs.String(&in.Title, "title", "", "", "the title (required)")
		fs.String(&in.Body, "body", "", "", "the description (Markdown)")
	case "list":
		fs.String(&filter.State, "state", "", "open", "open, closed, merged or all")
		fs.String(&filter.Author, "author", "", "", "only the requests of this user")
		fs.String(&filter.Reviewer, "reviewer", "", "", "only the requests this user is asked to review")
	case "checkout":
		fs.String(&dir, "C", "", ".", "the git work tree to check the request out in")
	case "merge":
		fs.String(&merge.Mode, "mode", "", "merge", "merge, squash, rebase or auto (the first the repository allows)")
		fs.Bool(&merge.DeleteSourceBranch, "delete-branch", "", false, "delete the source branch after the merge")
	case "comment":
		fs.String(&note.Body, "body", "", "", "the comment (Markdown)")
		fs.String(&bodyFile, "body-file", "", "", "read the comment from this file (- for standard input)")
		fs.String(&note.Path, "path", "", "", "comment on a line of this changed file")
		fs.Int(&note.Line, "line", "", 0, "the line of --path, from 1, at the request's head")
	case "metrics":
		fs.String(&failWorse, "fail-worse", "", "", "NAME=LIMIT,…: exit 1 when a metric got worse by more than LIMIT (0.02, or 1% of the target's value; * is every metric)")
	}
	rest, err := parseWorkspaceArgs(fs, args[1:], e, true)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(e.stderr, "nimbus:", err)
		return 2
	}
	inPipeline(e, &c.server, &c.token)
	c.server = strings.TrimRight(c.server, "/")
	want := 1
	if verb == "checkout" || verb == "merge" || verb == "comment" || verb == "metrics" {
		want = 2
	}
	if (verb == "comment" || verb == "metrics") && len(rest) == 0 && e.getenv("CNB_PULL_REQUEST_IID") != "" && e.getenv("CNB_REPO_SLUG") != "" {
		rest = []string{e.getenv("CNB_REPO_SLUG"), e.getenv("CNB_PULL_REQUEST_IID")} // the pipeline's own request
	}
	switch {
	case c.server == "":
		fmt.Fprintf(e.stderr, "nimbus pr %s: --server (NIMBUS_SERVER) is required\n", verb)
		return 2
	case c.token == "":
		fmt.Fprintf(e.stderr, "nimbus pr %s: --token (NIMBUS_TOKEN) is required: a personal token (%s/settings/tokens)\n", verb, c.server)
		return 2
	case len(rest) != want:
		fmt.Fprintln(e.stderr, prUsage)
		return 2
	}
	org, repo, ok := strings.Cut(rest[0], "/")
	if !ok || org == "" || repo == "" || strings.Contains(repo, "/") {
		fmt.Fprintf(e.stderr, "nimbus pr %s: %q is not ORG/REPO\n", verb, rest[0])
		return 2
	}
	var number int64
	if want == 2 {
		if number, err = strconv.ParseInt(rest[1], 10, 64); err != nil || number <= 0 {
			fmt.Fprintf(e.stderr, "nimbus pr %s: %q is not a pull request number\n", verb, rest[1])
			return 2
		}
	}
	c.api = apiclient.New(c.server, apiclient.WithToken(c.token), apiclient.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	switch verb {
	case "create":
		if in.SourceBranch == "" || in.Title == "" {
			fmt.Fprintln(e.stderr, "nimbus pr create: --source and --title are required")
			return 2
		}
		err = c.create(ctx, e.stdout, org, repo, in)
	case "list":
		err = c.list(ctx, e.stdout, org, repo, filter)
	case "checkout":
		err = c.checkout(ctx, e.stdout, dir, org, repo, number)
	case "merge":
		err = c.merge(ctx, e.stdout, org, repo, number, merge)
	case "comment":
		if note.Body, err = commentBody(e, note.Body, bodyFile); err != nil {
			fmt.Fprintf(e.stderr, "nimbus pr comment: %v\n", err)
			return 2
		}
		err = c.comment(ctx, e.stdout, org, repo, number, note)
	case "metrics":
		limits, perr := parseLimits(failWorse)
		if perr != nil {
			fmt.Fprintf(e.stderr, "nimbus pr metrics: --fail-worse: %v\n", perr)
			return 2
		}
		err = c.metrics(ctx, e.stdout, org, repo, number, limits)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "nimbus pr %s: %v\n", verb, err)
		return 1
	}
	return 0
}

func (c *prClient) create(ctx context.Context, out io.Writer, org, repo string, in apiclient.NewPull) error {
	pr, err := c.api.OpenPull(ctx, org, repo, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pull request #%d: %s into %s\n  %s\n", pr.Number, pr.SourceBranch, pr.TargetBranch, pr.URL)
	if !pr.Mergeable {
		fmt.Fprintf(out, "  conflicts: %s\n", strings.Join(pr.Conflicts, ", "))
	}
	return nil
}

func (c *prClient) list(ctx context.Context, out io.Writer, org, repo string, f apiclient.PullFilter) error {
	prs, err := c.api.Pulls(ctx, org, repo, f)
	if err != nil {
		return err
	}
	if len(prs) == 0 {
		fmt.Fprintf(out, "%s/%s has no %s pull requests that match\n", org, repo, f.State)
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMBER\tSTATE\tCHECKS\tBRANCHES\tAUTHOR\tTITLE")
	for _, p := range prs {
		st := p.State
		if st == "open" && !p.Mergeable {
			st = "open, conflicts"
		} else if st == "open" && len(p.ApprovedBy) > 0 {
			st = "open, approved"
		}
		checks, from := p.Checks, p.SourceBranch
		if checks == "" {
			checks = "-"
		}
		if p.SourceRepo != "" {
			from = p.SourceRepo + ":" + from
		}
		fmt.Fprintf(tw, "#%d\t%s\t%s\t%s → %s\t%s\t%s\n", p.Number, st, checks, from, p.TargetBranch, p.Author, p.Title)
	}
	return tw.Flush()
}

func (c *prClient) merge(ctx context.Context, out io.Writer, org, repo string, number int64, in apiclient.PullMerge) error {
	pr, err := c.api.MergePull(ctx, org, repo, number, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pull request #%d merged into %s (%s): %s\n", pr.Number, pr.TargetBranch, pr.MergeMode, pr.MergeCommit)
	return nil
}

// checkout fetches refs/pull/NUMBER/head into the branch pr-NUMBER of the work tree it runs in.
func (c *prClient) checkout(ctx context.Context, out io.Writer, dir, org, repo string, number int64) error {
	pr, err := c.api.GetPull(ctx, org, repo, number)
	if err != nil {
		return err
	}
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("nimbus:"+c.token))
	remote := c.server + "/" + org + "/" + repo + ".git"
	branch := "pr-" + strconv.FormatInt(number, 10)
	for _, step := range []struct {
		name string
		args []string
	}{
		{"fetch", []string{"-c", "http.extraHeader=" + auth, "fetch", "--quiet", remote, "refs/pull/" + strconv.FormatInt(number, 10) + "/head"}},
		{"checkout", []string{"checkout", "--quiet", "-B", branch, "FETCH_HEAD"}},
	} {
		cmd := exec.CommandContext(ctx, "git", step.args...)
		cmd.Dir = dir
		if msg, err := cmd.CombinedOutput(); err != nil {
			// The header carries the token: the command line is never printed.
			return fmt.Errorf("git %s: %v: %s", step.name, err, strings.TrimSpace(strings.ReplaceAll(string(msg), c.token, "***")))
		}
	}
	fmt.Fprintf(out, "pull request #%d (%s, %s) is checked out on %s\n", number, pr.Title, pr.HeadSHA[:min(8, len(pr.HeadSHA))], branch)
	return nil
}

// commentBody is the comment's text from --body or --body-file (one of them).
func commentBody(e env, body, file string) (string, error) {
	switch {
	case body != "" && file != "":
		return "", errors.New("give --body or --body-file, not both")
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(e.stdin, 1<<20))
		return string(b), err
	case file != "":
		b, err := os.ReadFile(file)
		return string(b), err
	case body == "":
		return "", errors.New("--body or --body-file is required")
	}
	return body, nil
}

func (c *prClient) comment(ctx context.Context, out io.Writer, org, repo string, number int64, in apiclient.NewPullComment) error {
	cm, err := c.api.CommentPull(ctx, org, repo, number, in)
	if err != nil {
		return err
	}
	where := "pull request #" + strconv.FormatInt(number, 10)
	if cm.Path != "" {
		where += fmt.Sprintf(", %s line %d", cm.Path, cm.Line)
	}
	fmt.Fprintf(out, "comment %d on %s of %s/%s\n", cm.ID, where, org, repo)
	return nil
}

// limit is how much worse a metric may get: Value absolute, or Value percent of the target's.
type limit struct {
	Value   float64
	Percent bool
}

// parseLimits reads --fail-worse: NAME=LIMIT pairs split by commas; * names every metric.
func parseLimits(s string) (map[string]limit, error) {
	out := map[string]limit{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		l := limit{}
		v, l.Percent = strings.CutSuffix(strings.TrimSpace(v), "%")
		n, err := strconv.ParseFloat(v, 64)
		if !ok || name == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not NAME=LIMIT (a number, or a percentage like 1%%)", pair)
		}
		l.Value = n
		out[strings.TrimSpace(name)] = l
	}
	return out, nil
}

// errRegressed is the exit of a metrics check that found a regression past its limit.
var errRegressed = errors.New("the model regressed past the limits of --fail-worse")

func (c *prClient) metrics(ctx context.Context, out io.Writer, org, repo string, number int64, limits map[string]limit) error {
	ms, err := c.api.PullMetrics(ctx, org, repo, number)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		fmt.Fprintf(out, "pull request #%d reported no metrics yet (##[set-output metric.NAME=VALUE] in a pull_request pipeline)\n", number)
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tTARGET\tREQUEST\tCHANGE\tVERDICT")
	failed := false
	for _, m := range ms {
		base, change := "-", "new"
		if m.Base != nil && m.Delta != nil {
			base, change = strconv.FormatFloat(m.Base.Value, 'g', 6, 64), strconv.FormatFloat(*m.Delta, 'g', 6, 64)
		}
		verdict := m.Verdict
		l, ok := limits[m.Name]
		if !ok {
			l, ok = limits["*"]
		}
		if ok && m.Verdict == "worse" && m.Base != nil && m.Delta != nil {
			allowed := l.Value
			if l.Percent {
				allowed = l.Value / 100 * math.Abs(m.Base.Value)
			}
			if math.Abs(*m.Delta) > allowed {
				verdict += fmt.Sprintf(" (past the limit %s)", formatLimit(l))
				failed = true
			}
		}
		fmt.Fprintf(tw, "%s (%s is better)\t%s\t%s\t%s\t%s\n", m.Name, m.Better, base, strconv.FormatFloat(m.Head.Value, 'g', 6, 64), change, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed {
		return errRegressed
	}
	return nil
}

func formatLimit(l limit) string {
	s := strconv.FormatFloat(l.Value, 'g', -1, 64)
	if l.Percent {
		return s + "%"
	}
	return s
}
