package e2e

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// pullConfig is the .cnb.yml of the pull request test; marker tells whose config ran.
func pullConfig(image, marker string) string {
	job := func(name, script string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + image + " }\n" +
			"      stages:\n        - name: " + name + "\n          script: " + script + "\n"
	}
	return "main:\n" +
		"  push:\n" + job("on-push", `echo "push of $CNB_COMMIT"`) +
		// The check writes its report back to the request with the job's own token.
		// Then git:reviewer asks one developer of the team (none is there for the first request).
		"  pull_request:\n" + job("check", `cat data.txt model.txt && echo "sha=$CNB_PULL_REQUEST_SHA target=$CNB_PULL_REQUEST_TARGET_SHA iid=$CNB_PULL_REQUEST_IID branch=$CNB_PULL_REQUEST_BRANCH at=$CNB_BRANCH commit=$CNB_COMMIT" && nimbus pr comment --body "check passed on $CNB_PULL_REQUEST_SHA"`) +
		"        - name: ask\n          type: git:reviewer\n          options: { type: add-reviewer-from-repo-members, count: 1 }\n" +
		"  pull_request.comment:\n" + job("comment", `echo "comment $CNB_COMMENT_ID said $CNB_COMMENT_BODY"`) +
		"  pull_request.target:\n" + job("trusted", `echo "config=`+marker+` commit=$CNB_COMMIT"`) +
		"  pull_request.merged:\n" + job("merged", `echo "merged as $CNB_COMMIT from $CNB_PULL_REQUEST_BRANCH"`) +
		"  pull_request.approved:\n" + job("approved", `echo "approved by $CNB_REVIEW_LAST_REVIEWED_BY state=$CNB_PULL_REQUEST_REVIEW_STATE all=$CNB_REVIEW_REVIEWED_BY commit=$CNB_COMMIT reviewers=$CNB_PULL_REQUEST_REVIEWERS."`) +
		// Fires only for a branch whose rule asks for review, once the request passes its gate.
		"  pull_request.mergeable:\n    - name: automerge\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + image + " }\n" +
		"      stages:\n        - name: merge\n          type: git:auto-merge\n          options: { mergeType: auto, mergeCommitMessage: 'Merge #$CNB_PULL_REQUEST_IID', mergeCommitFooter: 'Auto-merged-by: nimbus', removeSourceBranch: true }\n"
}

// A pull request end to end on real git, PostgreSQL, Redis and Docker: push a branch, open a
// request by API; pull_request runs the pre-merged commit (both sides' files) with the
// CNB_PULL_REQUEST_* variables, pull_request.target runs the target's own config; a second
// developer's approval fires pull_request.approved; merging fires push and pull_request.merged
// on main; a conflicting request names its file; a protected main refuses a direct push in git,
// refuses a merge before review and checks with both rules named, and, once both hold, fires
// pull_request.mergeable, whose git:auto-merge merges the request.
func TestPullRequestRunsChecksAndMerges(t *testing.T) {
	w := newWorld(t)
	w.agent("", "NIMBUS_AGENT_NETWORK=host") // the check's job calls the server (nimbus pr comment)
	remote, _ := url.Parse(w.base + "/ml/trainer.git")
	remote.User = url.UserPassword("alice", w.token)
	write := func(files map[string]string) {
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(w.work, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitPush := func(branch, msg string, files map[string]string) string {
		write(files)
		gitRun(t, w.work, "add", ".")
		gitRun(t, w.work, "commit", "-q", "-m", msg)
		gitRun(t, w.work, "push", "-q", remote.String(), branch)
		return gitRun(t, w.work, "rev-parse", "HEAD")
	}

	// main: the config and a README (build #1, push).
	commitPush("main", "ci", map[string]string{".cnb.yml": pullConfig(w.image, "main"), "README.md": "trainer\n"})
	w.waitBuildSuccess(1, 2*time.Minute)
	// feature: a model file, and a config whose pull_request.target would say "feature".
	gitRun(t, w.work, "checkout", "-q", "-b", "feature")
	head := commitPush("feature", "a bigger model", map[string]string{"model.txt": "layers=4\n", ".cnb.yml": pullConfig(w.image, "feature")})
	// main moves on (build #2, push).
	gitRun(t, w.work, "checkout", "-q", "main")
	base := commitPush("main", "more data", map[string]string{"data.txt": "rows=1000\n"})
	w.waitBuildSuccess(2, 2*time.Minute)

	pr, err := w.api.api.OpenPull(t.Context(), "ml", "trainer", apiclient.NewPull{SourceBranch: "feature", Title: "A bigger model"})
	w.api.check("open", err)
	if pr.Number != 1 || pr.State != "open" || !pr.Mergeable || pr.HeadSHA != head || pr.BaseSHA != base || pr.TargetBranch != "main" ||
		pr.Author != "alice" || len(pr.MergeSHA) != 40 {
		t.Fatalf("opened %+v", pr)
	}
	// Build #3 is pull_request, #4 pull_request.target (no pull_request.update pipelines).
	check := w.waitBuildSuccess(3, 2*time.Minute)
	if check.Event != "pull_request" || check.Branch != "main" || check.Commit != pr.MergeSHA {
		t.Fatalf("pull_request build %+v, want the pre-merged commit %s on main", check, pr.MergeSHA)
	}
	log := w.jobLogIn(check, "check", "check")
	for _, want := range []string{"rows=1000", "layers=4", "sha=" + head, "target=" + base, "iid=1", "branch=feature", "at=main", "commit=" + pr.MergeSHA} {
		if !strings.Contains(log, want) {
			t.Errorf("the pull_request job's log lacks %q:\n%s", want, log)
		}
	}
	// Its report is a comment on the request, posted as the build's user and marked with the
	// pipeline; it fires no pull_request.comment (no build between #4 and #5).
	notes, err := w.api.api.PullComments(t.Context(), "ml", "trainer", 1)
	w.api.check("comments", err)
	if len(notes) != 1 || notes[0].Pipeline == nil || notes[0].Pipeline.ID != check.Pipelines[0].ID || notes[0].Author != "alice" ||
		notes[0].Body != "check passed on "+head {
		t.Fatalf("the check's report: %+v", notes)
	}
	target := w.waitBuildSuccess(4, 2*time.Minute)
	if target.Event != "pull_request.target" || target.Commit != base {
		t.Fatalf("pull_request.target build %+v, want main's head %s", target, base)
	}
	if log := w.jobLogIn(target, "trusted", "trusted"); !strings.Contains(log, "config=main commit="+base) {
		t.Errorf("pull_request.target did not run the target's own config:\n%s", log)
	}

	// bob, a developer of the team, approves: pull_request.approved runs (#5) on the pre-merged
	// commit; alice, the author, cannot approve her own.
	var invite struct {
		Link string `json:"link"`
	}
	w.alice.must(http.StatusCreated, http.MethodPost, "/api/v1/orgs/ml/invitations", map[string]string{"email": "bob@example.com", "role": "developer"}, &invite)
	_, secret, ok := strings.Cut(invite.Link, "token=")
	if !ok {
		t.Fatalf("invitation link %q", invite.Link)
	}
	bob := newClient(t, w.base)
	bob.signup("bob")
	bob.must(http.StatusNoContent, http.MethodPost, "/api/v1/invitations/accept", map[string]string{"token": secret}, nil)
	if st := w.api.do(http.MethodPost, "/api/v1/repos/ml/trainer/pulls/1/reviews", map[string]string{"state": "approve"}, nil); st != http.StatusUnprocessableEntity {
		t.Fatalf("the author approving her own request: %d", st)
	}
	_, err = bob.api.ReviewPull(t.Context(), "ml", "trainer", 1, "approve", "")
	bob.check("approve", err)
	if got, err := w.api.api.GetPull(t.Context(), "ml", "trainer", 1); err != nil || !slices.Equal(got.ApprovedBy, []string{"bob"}) {
		t.Fatalf("after bob's approval: %+v %v", got, err)
	}
	approved := w.waitBuildSuccess(5, 2*time.Minute)
	if log := w.jobLogIn(approved, "approved", "approved"); approved.Event != "pull_request.approved" ||
		!strings.Contains(log, "approved by bob state=approve all=bob commit="+pr.MergeSHA) {
		t.Fatalf("build #5 %+v:\n%s", approved, log)
	}

	// Merge: main moves to a squash commit; push (#6) and pull_request.merged (#7) run on it.
	merged, err := w.api.api.MergePull(t.Context(), "ml", "trainer", 1, apiclient.PullMerge{Mode: "squash", DeleteSourceBranch: true})
	w.api.check("merge", err)
	if merged.State != "merged" || merged.MergeMode != "squash" || merged.MergedBy == nil || *merged.MergedBy != "alice" {
		t.Fatalf("merged %+v", merged)
	}
	gitRun(t, w.work, "fetch", "-q", remote.String(), "main")
	if tip := gitRun(t, w.work, "rev-parse", "FETCH_HEAD"); tip != merged.MergeCommit ||
		gitRun(t, w.work, "rev-parse", "FETCH_HEAD^") != base || gitRun(t, w.work, "show", "FETCH_HEAD:model.txt") != "layers=4" {
		t.Fatalf("main is at %s (parent %s), want the squash %s on %s", tip, gitRun(t, w.work, "rev-parse", "FETCH_HEAD^"), merged.MergeCommit, base)
	}
	if out := gitRun(t, w.work, "ls-remote", remote.String(), "refs/heads/feature"); out != "" {
		t.Errorf("the source branch was not deleted: %s", out)
	}
	push := w.waitBuildSuccess(6, 2*time.Minute)
	if push.Event != "push" || push.Commit != merged.MergeCommit {
		t.Fatalf("build #6 %+v, want the push of the merge", push)
	}
	after := w.waitBuildSuccess(7, 2*time.Minute)
	if after.Event != "pull_request.merged" || after.Commit != merged.MergeCommit ||
		!strings.Contains(w.jobLogIn(after, "merged", "merged"), "merged as "+merged.MergeCommit+" from feature") {
		t.Fatalf("build #7 %+v, want pull_request.merged on the merge", after)
	}
	// A request whose branch adds data.txt as main did, with other rows, conflicts, and says
	// where (its pull_request.target still runs: build #8).
	gitRun(t, w.work, "checkout", "-q", "-b", "clash", base+"~1")
	commitPush("clash", "clash", map[string]string{"data.txt": "rows=5\n"})
	gitRun(t, w.work, "checkout", "-q", "main")
	clash, err := w.api.api.OpenPull(t.Context(), "ml", "trainer", apiclient.NewPull{SourceBranch: "clash", Title: "Clash"})
	w.api.check("open clash", err)
	if clash.Mergeable || clash.MergeSHA != "" || !slices.Equal(clash.Conflicts, []string{"data.txt"}) {
		t.Fatalf("conflicting request %+v, want data.txt named", clash)
	}
	var refusal struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if st := w.api.do(http.MethodPost, "/api/v1/repos/ml/trainer/pulls/2/merge", map[string]any{}, &refusal); st != http.StatusConflict ||
		!strings.Contains(refusal.Error.Message, "data.txt") {
		t.Fatalf("merging the conflict: %d %+v", st, refusal)
	}

	// main protected (1 approval, the check pipeline): a direct push fails in git itself, with
	// the rule in its output, and main does not move.
	w.alice.must(http.StatusOK, http.MethodPut, "/api/v1/repos/ml/trainer/branch-rules",
		map[string]any{"pattern": "main", "required_approvals": 1, "required_checks": []string{"check"}}, nil)
	gitRun(t, w.work, "fetch", "-q", remote.String(), "main")
	gitRun(t, w.work, "checkout", "-q", "-B", "main", "FETCH_HEAD")
	before := gitRun(t, w.work, "rev-parse", "HEAD")
	write(map[string]string{"direct.txt": "no review\n"})
	gitRun(t, w.work, "add", ".")
	gitRun(t, w.work, "commit", "-q", "-m", "straight to main")
	cmd := exec.Command("git", "push", remote.String(), "main")
	cmd.Dir, cmd.Env = w.work, []string{"HOME=" + w.work, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `the branch rule "main" protects main: changes reach it through a pull request`) {
		t.Fatalf("a direct push to protected main: %v\n%s", err, out)
	}
	if now := strings.Fields(gitRun(t, w.work, "ls-remote", remote.String(), "refs/heads/main"))[0]; now != before {
		t.Fatalf("main moved to %s on a refused push", now)
	}

	// Through the gate: request #3 (pull_request #9, .target #10). Merging at once is a 409
	// naming both unmet rules: no approval, and the check still running.
	gitRun(t, w.work, "reset", "-q", "--hard", before)
	gitRun(t, w.work, "checkout", "-q", "-b", "tune")
	tuned := commitPush("tune", "tune lr", map[string]string{"lr.txt": "3e-4\n"})
	tune, err := w.api.api.OpenPull(t.Context(), "ml", "trainer", apiclient.NewPull{SourceBranch: "tune", Title: "Tune lr"})
	w.api.check("open tune", err)
	var gated struct {
		Error struct {
			Code    string
			Message string
			Details struct {
				Unmet []struct{ Code, Rule, Message string }
			}
		} `json:"error"`
	}
	if st := w.api.do(http.MethodPost, "/api/v1/repos/ml/trainer/pulls/3/merge", map[string]any{}, &gated); st != http.StatusConflict ||
		len(gated.Error.Details.Unmet) != 2 || gated.Error.Details.Unmet[0].Code != "approvals" || gated.Error.Details.Unmet[1].Code != "checks_pending" ||
		gated.Error.Details.Unmet[0].Rule != "main" || !strings.Contains(gated.Error.Message, "asks for 1 approving review(s); it has 0") {
		t.Fatalf("merging before review and checks: %d %+v", st, gated.Error)
	}
	if c := w.waitBuildSuccess(9, 2*time.Minute); c.Event != "pull_request" {
		t.Fatalf("build #9 %+v", c)
	}
	w.waitBuildSuccess(10, 2*time.Minute)
	got, err := w.api.api.GetPull(t.Context(), "ml", "trainer", tune.Number)
	w.api.check("get tune", err)
	// The check's git:reviewer asked bob, the team's one developer besides the author.
	if !slices.Equal(got.RequestedReviewers, []string{"bob"}) {
		t.Fatalf("requested reviewers of #3: %q", got.RequestedReviewers)
	}
	if got.Gate == nil || got.Gate.Passed || got.Gate.Rule != "main" || !slices.Equal(got.Gate.UnmetCodes(), []string{"approvals"}) ||
		len(got.Gate.Checks) != 1 || got.Gate.Checks[0].Name != "check" || got.Gate.Checks[0].Status != "success" || got.Gate.Checks[0].Build != 9 {
		t.Fatalf("the gate with green checks: %+v", got.Gate)
	}
	// bob approves: pull_request.approved (#11), then the gate passes and pull_request.mergeable
	// (#12) runs git:auto-merge on main's head, which merges as bob (whose approval did it) and
	// deletes the branch; push (#13) and pull_request.merged (#14) follow.
	_, err = bob.api.ReviewPull(t.Context(), "ml", "trainer", tune.Number, "approve", "")
	bob.check("approve tune", err)
	if log := w.jobLogIn(w.waitBuildSuccess(11, 2*time.Minute), "approved", "approved"); !strings.Contains(log, "reviewers=bob.") {
		t.Fatalf("CNB_PULL_REQUEST_REVIEWERS of #3's approval:\n%s", log)
	}
	auto := w.waitBuildSuccess(12, 2*time.Minute)
	if log := w.jobLogIn(auto, "automerge", "merge"); auto.Event != "pull_request.mergeable" || auto.Commit != before ||
		!strings.Contains(log, "git:auto-merge: merged pull request #3 of ml/trainer (merge)") {
		t.Fatalf("build #12 %+v:\n%s", auto, log)
	}
	done, err := w.api.api.GetPull(t.Context(), "ml", "trainer", tune.Number)
	w.api.check("get merged tune", err)
	if done.State != "merged" || done.MergeMode != "merge" || done.MergedBy == nil || *done.MergedBy != "bob" {
		t.Fatalf("after git:auto-merge: %+v", done)
	}
	gitRun(t, w.work, "fetch", "-q", remote.String(), "main")
	if msg := gitRun(t, w.work, "log", "-1", "--format=%B", "FETCH_HEAD"); gitRun(t, w.work, "rev-parse", "FETCH_HEAD") != done.MergeCommit ||
		gitRun(t, w.work, "rev-parse", "FETCH_HEAD^2") != tuned || msg != "Merge #3\n\nAuto-merged-by: nimbus" {
		t.Fatalf("main after git:auto-merge: %s %q", gitRun(t, w.work, "log", "-1", "--format=%H %P", "FETCH_HEAD"), msg)
	}
	if out := gitRun(t, w.work, "ls-remote", remote.String(), "refs/heads/tune"); out != "" {
		t.Errorf("removeSourceBranch did not delete tune: %s", out)
	}
	if m := w.waitBuildSuccess(14, 2*time.Minute); m.Event != "pull_request.merged" || m.Commit != done.MergeCommit {
		t.Fatalf("build #14 %+v", m)
	}
	// mergeable fired once: no other build of its event.
	builds, err := w.api.api.Builds(t.Context(), "ml", "trainer", 50)
	w.api.check("builds", err)
	n := 0
	for _, b := range builds {
		if b.Event == "pull_request.mergeable" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d pull_request.mergeable builds, want 1", n)
	}
	// A person's comment on the conflicting request fires pull_request.comment (#15) on its
	// source head, with the comment in CNB_COMMENT_*.
	said, err := bob.api.CommentPull(t.Context(), "ml", "trainer", 2, apiclient.NewPullComment{Body: "please rebase"})
	bob.check("comment", err)
	if c := w.waitBuildSuccess(15, 2*time.Minute); c.Event != "pull_request.comment" ||
		!strings.Contains(w.jobLogIn(c, "comment", "comment"), "comment "+itoa(said.ID)+" said please rebase") {
		t.Fatalf("build #15 %+v", c)
	}
}
