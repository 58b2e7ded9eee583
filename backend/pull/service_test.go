package pull_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
)

// fixture is a team's repository on disk, a work tree that pushes to it with the real git
// client, and the pull request service over both.
type fixture struct {
	t     *testing.T
	w     *testworld.World
	repo  *repo.Repo
	bare  string
	work  string
	env   []string
	pulls *pull.Service
	alice pull.Person
}

func newFixture(t *testing.T, db *gorm.DB) *fixture {
	t.Helper()
	ctx := context.Background()
	w := testworld.New(t, db, testworld.Options{})
	u := w.Signup(t, "alice")
	o, err := w.Orgs.Create(ctx, u, "acme")
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.Repos.Create(ctx, o, "model", "private", "main", "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, w: w, repo: r, bare: w.Repos.Path(r), work: t.TempDir(),
		pulls: pull.NewService(db, w.Repos, w.Clock, w.Log), alice: pull.Person{ID: u.ID, Name: "Alice", Email: "alice@example.com"}}
	f.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	f.git("init", "-q", "-b", "main")
	f.commit(map[string]string{"train.py": "lr = 0.1\nepochs = 10\n", "README.md": "model\n"}, "base")
	f.git("push", "-q", f.bare, "main")
	return f
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Alice", "-c", "user.email=alice@example.com"}, args...)...)
	cmd.Dir, cmd.Env = f.work, f.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files on the checked-out branch and commits them.
func (f *fixture) commit(files map[string]string, msg string) string {
	f.t.Helper()
	for name, content := range files {
		if err := os.WriteFile(f.work+"/"+name, []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	f.git("add", "-A")
	f.git("commit", "-q", "-m", msg)
	return f.git("rev-parse", "HEAD")
}

// branch makes branch from main with one commit of files, and pushes it.
func (f *fixture) branch(name string, files map[string]string) string {
	f.t.Helper()
	f.git("checkout", "-q", "-B", name, "main")
	sha := f.commit(files, name)
	f.git("push", "-q", f.bare, name)
	f.git("checkout", "-q", "main")
	return sha
}

// ref is what ref holds in the server's repository ("" when it does not exist).
func (f *fixture) ref(ref string) string {
	sha, err := git.ResolveRef(context.Background(), f.bare, ref)
	if err != nil {
		return ""
	}
	return sha
}

// show is `git show <rev>:<path>` in the server's repository.
func (f *fixture) show(rev, path string) string {
	b, err := git.ReadFile(context.Background(), f.bare, rev, path)
	if err != nil {
		return ""
	}
	return string(b)
}

func wantKind(t *testing.T, what string, err error, k fault.Kind) {
	t.Helper()
	if fault.KindOf(err) != k {
		t.Fatalf("%s: %v (%v), want %v", what, err, fault.KindOf(err), k)
	}
}

// Opening a request numbers it, keeps its source on refs/pull/N/head and its pre-merged commit,
// with both sides' changes, on refs/pull/N/merge; a push re-syncs it to a new pre-merged commit,
// and a sync with nothing moved keeps the same one.
func TestOpenAndSync(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		feature := f.branch("lower-lr", map[string]string{"train.py": "lr = 0.01\nepochs = 10\n"})
		f.commit(map[string]string{"data.md": "new data\n"}, "main moves on")
		f.git("push", "-q", f.bare, "main")

		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "lower-lr", Target: "main", Title: " Lower the learning rate ", Body: "loss goes down"})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Number != 1 || pr.State != pull.StateOpen || pr.Title != "Lower the learning rate" || pr.HeadSHA != feature || pr.BaseSHA != f.ref("refs/heads/main") {
			t.Fatalf("opened %+v", pr)
		}
		if f.ref(pull.HeadRef(1)) != feature || pr.MergeSHA == "" || f.ref(pull.MergeRef(1)) != pr.MergeSHA || len(pr.ConflictPaths()) != 0 {
			t.Fatalf("refs: head %s merge %s, request %+v", f.ref(pull.HeadRef(1)), f.ref(pull.MergeRef(1)), pr)
		}
		if f.show(pr.MergeSHA, "train.py") != "lr = 0.01\nepochs = 10\n" || f.show(pr.MergeSHA, "data.md") != "new data\n" {
			t.Fatalf("the pre-merged tree lacks a side: train.py %q data.md %q", f.show(pr.MergeSHA, "train.py"), f.show(pr.MergeSHA, "data.md"))
		}
		_, err = f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "lower-lr", Target: "main", Title: "again"})
		wantKind(t, "a second request for the same branches", err, fault.KindConflict)

		// Nothing moved: the same pre-merged commit.
		if moved, err := f.pulls.Sync(ctx, f.repo, pr); err != nil || moved {
			t.Fatalf("sync with nothing moved: %v %v", moved, err)
		}
		same, _ := f.pulls.Get(ctx, f.repo, 1)
		if same.MergeSHA != pr.MergeSHA {
			t.Fatalf("pre-merged commit changed with nothing moved: %s -> %s", pr.MergeSHA, same.MergeSHA)
		}
		// A push to the source moves it.
		f.git("checkout", "-q", "lower-lr")
		next := f.commit(map[string]string{"train.py": "lr = 0.005\nepochs = 10\n"}, "lower still")
		f.git("push", "-q", f.bare, "lower-lr")
		f.git("checkout", "-q", "main")
		if moved, err := f.pulls.Sync(ctx, f.repo, same); err != nil || !moved {
			t.Fatalf("sync after a push: %v %v", moved, err)
		}
		got, _ := f.pulls.Get(ctx, f.repo, 1)
		if got.HeadSHA != next || got.MergeSHA == pr.MergeSHA || f.ref(pull.MergeRef(1)) != got.MergeSHA || f.ref(pull.HeadRef(1)) != next ||
			f.show(got.MergeSHA, "train.py") != "lr = 0.005\nepochs = 10\n" {
			t.Fatalf("after the push: %+v, merge ref %s", got, f.ref(pull.MergeRef(1)))
		}
		// The next request gets the next number.
		f.branch("more-epochs", map[string]string{"README.md": "model, longer\n"})
		second, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "more-epochs", Target: "main", Title: "More epochs"})
		if err != nil || second.Number != 2 {
			t.Fatalf("second request: %+v %v", second, err)
		}
	})
}

// What opening refuses, with nothing written.
func TestOpenRefuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		f.branch("x", map[string]string{"x.txt": "x\n"})
		f.git("branch", "behind", "main")
		f.git("push", "-q", f.bare, "behind")
		for _, c := range []struct {
			name string
			in   pull.OpenInput
			kind fault.Kind
		}{
			{"no title", pull.OpenInput{Source: "x", Target: "main", Title: "  "}, fault.KindInvalid},
			{"a two-line title", pull.OpenInput{Source: "x", Target: "main", Title: "a\nb"}, fault.KindInvalid},
			{"a long title", pull.OpenInput{Source: "x", Target: "main", Title: strings.Repeat("t", pull.MaxTitle+1)}, fault.KindInvalid},
			{"a huge body", pull.OpenInput{Source: "x", Target: "main", Title: "t", Body: strings.Repeat("b", pull.MaxBody+1)}, fault.KindInvalid},
			{"an unknown source", pull.OpenInput{Source: "nope", Target: "main", Title: "t"}, fault.KindInvalid},
			{"an unknown target", pull.OpenInput{Source: "x", Target: "nope", Title: "t"}, fault.KindInvalid},
			{"a full ref", pull.OpenInput{Source: "refs/heads/x", Target: "main", Title: "t"}, fault.KindInvalid},
			{"an option", pull.OpenInput{Source: "--upload-pack=x", Target: "main", Title: "t"}, fault.KindInvalid},
			{"the same branch", pull.OpenInput{Source: "main", Target: "main", Title: "t"}, fault.KindInvalid},
			{"nothing to merge", pull.OpenInput{Source: "behind", Target: "main", Title: "t"}, fault.KindInvalid},
		} {
			_, err := f.pulls.Open(ctx, f.repo, f.alice, c.in)
			wantKind(t, c.name, err, c.kind)
		}
		if list, err := f.pulls.List(ctx, f.repo, pull.Filter{}, paging.Page{}); err != nil || len(list) != 0 {
			t.Fatalf("refusals wrote requests: %v %v", list, err)
		}
		if refs := f.git("ls-remote", f.bare, "refs/pull/*"); refs != "" {
			t.Fatalf("refusals wrote refs: %s", refs)
		}
	})
}

// A conflict names its files, keeps no merge ref and refuses to merge; merge, squash and rebase
// each move the target as git would, and a merged request says how.
func TestMerge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		f.branch("clash", map[string]string{"train.py": "lr = 1\nepochs = 10\n"})
		f.commit(map[string]string{"train.py": "lr = 2\nepochs = 10\n"}, "main changes lr")
		f.git("push", "-q", f.bare, "main")
		clash, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "clash", Target: "main", Title: "Clash"})
		if err != nil {
			t.Fatal(err)
		}
		if clash.MergeSHA != "" || !slices.Equal(clash.ConflictPaths(), []string{"train.py"}) || f.ref(pull.MergeRef(clash.Number)) != "" {
			t.Fatalf("conflicting request %+v, merge ref %q", clash, f.ref(pull.MergeRef(clash.Number)))
		}
		_, err = f.pulls.Merge(ctx, f.repo, clash.Number, f.alice, pull.MergeInput{})
		wantKind(t, "merging a conflict", err, fault.KindConflict)
		if !strings.Contains(err.Error(), "train.py") {
			t.Fatalf("the refusal does not name the file: %v", err)
		}

		for _, mode := range []string{pull.ModeMerge, pull.ModeSquash, pull.ModeRebase} {
			before := f.ref("refs/heads/main")
			f.git("fetch", "-q", f.bare, "main") // the last merge moved it on the server
			f.git("checkout", "-q", "-B", "main", "FETCH_HEAD")
			f.git("checkout", "-q", "-B", "m-"+mode, "main")
			env := f.env
			if mode == pull.ModeSquash { // a proposer other than the merger
				f.env = append(append([]string{}, env...), "GIT_AUTHOR_NAME=Bob", "GIT_AUTHOR_EMAIL=bob@example.com")
			}
			f.commit(map[string]string{mode + "-1.txt": "1\n"}, mode+" one")
			head := f.commit(map[string]string{mode + "-2.txt": "2\n"}, mode+" two")
			f.env = env
			f.git("push", "-q", f.bare, "m-"+mode)
			f.git("checkout", "-q", "main")
			f.commit(map[string]string{"main-" + mode + ".txt": "main\n"}, "main before "+mode)
			f.git("push", "-q", f.bare, "main")
			base := f.ref("refs/heads/main")
			pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "m-" + mode, Target: "main", Title: "Try " + mode})
			if err != nil {
				t.Fatal(err)
			}
			m, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{Mode: mode, DeleteSource: true})
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			tip := f.ref("refs/heads/main")
			if tip != m.Target.New || m.Target.Old != base || base == before || m.Request.State != pull.StateMerged ||
				m.Request.MergeMode != mode || m.Request.MergeCommit != tip || m.Request.MergedBy == nil || *m.Request.MergedBy != f.alice.ID {
				t.Fatalf("%s: merged %+v / %+v, main at %s", mode, m, m.Request, tip)
			}
			if !m.SourceDeleted || f.ref("refs/heads/m-"+mode) != "" || f.ref(pull.HeadRef(pr.Number)) != head {
				t.Fatalf("%s: source deleted %v, branch %q, head ref %q", mode, m.SourceDeleted, f.ref("refs/heads/m-"+mode), f.ref(pull.HeadRef(pr.Number)))
			}
			// The merged tree has both sides, whatever the mode.
			if f.show(tip, mode+"-2.txt") != "2\n" || f.show(tip, "main-"+mode+".txt") != "main\n" {
				t.Fatalf("%s: the merged tree lacks a side", mode)
			}
			parents := strings.Fields(f.git("--git-dir="+f.bare, "log", "-1", "--format=%P", tip))
			count := f.git("--git-dir="+f.bare, "rev-list", "--count", base+".."+tip)
			author := f.git("--git-dir="+f.bare, "log", "-1", "--format=%an <%ae> / %cn <%ce>", tip)
			switch mode {
			case pull.ModeMerge: // a merge commit of main and the source, by the merger
				if !slices.Equal(parents, []string{base, head}) || author != "Alice <alice@example.com> / Alice <alice@example.com>" {
					t.Fatalf("merge: parents %v, by %s", parents, author)
				}
			case pull.ModeSquash: // one commit on main, the proposer's, committed by the merger
				if author != "Bob <bob@example.com> / Alice <alice@example.com>" {
					t.Fatalf("squash: by %s, want the request's author and the merger", author)
				}
				if !slices.Equal(parents, []string{base}) || count != "1" || f.git("--git-dir="+f.bare, "log", "-1", "--format=%s", tip) != "Try squash (#"+strconv.FormatInt(pr.Number, 10)+")" {
					t.Fatalf("squash: parents %v, %s commits", parents, count)
				}
			case pull.ModeRebase: // the two commits replayed on main, no merge commit
				if len(parents) != 1 || count != "2" || f.git("--git-dir="+f.bare, "log", "-1", "--format=%s", tip) != "rebase two" {
					t.Fatalf("rebase: parents %v, %s commits", parents, count)
				}
			}
			_, err = f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{})
			wantKind(t, mode+": merging twice", err, fault.KindConflict)
			_, err = f.pulls.Reopen(ctx, f.repo, pr.Number, f.alice)
			wantKind(t, mode+": reopening a merged request", err, fault.KindConflict)
		}
		_, err = f.pulls.Merge(ctx, f.repo, clash.Number, f.alice, pull.MergeInput{Mode: "octopus"})
		wantKind(t, "an unknown mode", err, fault.KindInvalid)
		_, err = f.pulls.Merge(ctx, f.repo, 99, f.alice, pull.MergeInput{})
		wantKind(t, "an unknown request", err, fault.KindNotFound)
	})
}

// Close, reopen, edit and list.
func TestLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		f.branch("a", map[string]string{"a.txt": "a\n"})
		f.branch("b", map[string]string{"b.txt": "b\n"})
		a, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "b", Target: "main", Title: "B"}); err != nil {
			t.Fatal(err)
		}
		closed, err := f.pulls.Close(ctx, f.repo, a.Number)
		if err != nil || closed.State != pull.StateClosed || closed.ClosedAt == nil {
			t.Fatalf("close: %+v %v", closed, err)
		}
		_, err = f.pulls.Close(ctx, f.repo, a.Number)
		wantKind(t, "closing twice", err, fault.KindConflict)
		for state, want := range map[string][]int64{"open": {2}, "closed": {1}, "all": {2, 1}, "": {2, 1}, "merged": nil} {
			list, err := f.pulls.List(ctx, f.repo, pull.Filter{State: state}, paging.Page{})
			var got []int64
			for _, p := range list {
				got = append(got, p.Number)
			}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("list %q: %v %v, want %v", state, got, err, want)
			}
		}
		_, err = f.pulls.List(ctx, f.repo, pull.Filter{State: "draft"}, paging.Page{})
		wantKind(t, "an unknown state", err, fault.KindInvalid)

		// Reopen syncs with what moved while it was closed.
		f.git("checkout", "-q", "a")
		moved := f.commit(map[string]string{"a.txt": "aa\n"}, "more a")
		f.git("push", "-q", f.bare, "a")
		f.git("checkout", "-q", "main")
		re, err := f.pulls.Reopen(ctx, f.repo, a.Number, f.alice)
		if err != nil || re.State != pull.StateOpen || re.ClosedAt != nil || re.HeadSHA != moved || f.ref(pull.HeadRef(1)) != moved {
			t.Fatalf("reopen: %+v %v", re, err)
		}

		title, body := "A, retitled", "why"
		ed, changed, err := f.pulls.Edit(ctx, f.repo, a.Number, f.alice, &title, &body)
		if err != nil || !changed || ed.Title != title || ed.Body != body {
			t.Fatalf("edit: %+v %v %v", ed, changed, err)
		}
		if _, changed, err := f.pulls.Edit(ctx, f.repo, a.Number, f.alice, &title, nil); err != nil || changed {
			t.Fatalf("an edit that changes nothing: %v %v", changed, err)
		}
		empty := ""
		_, _, err = f.pulls.Edit(ctx, f.repo, a.Number, f.alice, &empty, nil)
		wantKind(t, "an empty title", err, fault.KindInvalid)
		if got, _ := f.pulls.Get(ctx, f.repo, a.Number); got.Title != title {
			t.Fatalf("a refused edit changed the title to %q", got.Title)
		}
	})
}

// Every change to a request fires its event once it is recorded; a push moves the requests it
// touches, and only a moved source fires Pushed.
func TestEventsAndPushes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		var got []string
		f.pulls.OnEvent(func(_ context.Context, ev pull.Event) {
			got = append(got, ev.What+" #"+strconv.FormatInt(ev.Request.Number, 10)+" "+ev.Request.HeadSHA[:7])
		})
		first := f.branch("a", map[string]string{"a.txt": "a\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		push := func(branch string, files map[string]string) (old, sha string) {
			old = f.ref("refs/heads/" + branch)
			f.git("fetch", "-q", f.bare, branch)
			f.git("checkout", "-q", "-B", branch, "FETCH_HEAD")
			sha = f.commit(files, "more on "+branch)
			f.git("push", "-q", f.bare, branch)
			f.git("checkout", "-q", "main")
			f.pulls.OnPush(ctx, f.repo, f.alice, []git.RefUpdate{{Old: old, New: sha, Ref: "refs/heads/" + branch}})
			return old, sha
		}
		_, second := push("a", map[string]string{"a.txt": "aa\n"})
		premerged := func() string { p, _ := f.pulls.Get(ctx, f.repo, pr.Number); return p.MergeSHA }
		before := premerged()
		push("main", map[string]string{"m.txt": "m\n"}) // the target moves: a new pre-merged commit, no event
		if after := premerged(); after == before || f.show(after, "m.txt") != "m\n" {
			t.Fatalf("a moved target did not refresh the pre-merged commit: %s -> %s", before, after)
		}
		title := "A, better"
		if _, _, err := f.pulls.Edit(ctx, f.repo, pr.Number, f.alice, &title, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{}); err != nil {
			t.Fatal(err)
		}
		want := []string{"opened #1 " + first[:7], "pushed #1 " + second[:7], "edited #1 " + second[:7], "merged #1 " + second[:7]}
		if !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

// Reviews: another person approves or asks for changes (their last word counts), the author
// only comments, an approval of an older head is stale after a push, and a closed request takes
// no review. Approvals and requests for changes fire their events.
func TestReviews(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		bobUser := f.w.Signup(t, "bob")
		bob := pull.Person{ID: bobUser.ID, Name: "bob", Email: "bob@example.com"}
		var fired []string
		f.pulls.OnEvent(func(_ context.Context, ev pull.Event) {
			if ev.Review != nil {
				fired = append(fired, ev.What+" by "+ev.By.Name)
			}
		})
		f.branch("a", map[string]string{"a.txt": "a\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name        string
			by          pull.Person
			state, body string
			kind        fault.Kind
		}{
			{"the author approves", f.alice, pull.ReviewApprove, "", fault.KindInvalid},
			{"the author asks for changes", f.alice, pull.ReviewRequestChanges, "x", fault.KindInvalid},
			{"changes without saying which", bob, pull.ReviewRequestChanges, " ", fault.KindInvalid},
			{"a comment without text", bob, pull.ReviewComment, "", fault.KindInvalid},
			{"an unknown state", bob, "lgtm", "", fault.KindInvalid},
		} {
			_, err := f.pulls.Review(ctx, f.repo, pr.Number, c.by, c.state, c.body)
			wantKind(t, c.name, err, c.kind)
		}
		if _, err := f.pulls.Review(ctx, f.repo, pr.Number, f.alice, pull.ReviewComment, "please look"); err != nil {
			t.Fatalf("the author comments: %v", err)
		}
		if _, err := f.pulls.Review(ctx, f.repo, pr.Number, bob, pull.ReviewRequestChanges, "lower the lr"); err != nil {
			t.Fatal(err)
		}
		summary := func() pull.ReviewSummary {
			p, _ := f.pulls.Get(ctx, f.repo, pr.Number)
			rs, err := f.pulls.Reviews(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			return pull.Summarize(p, rs)
		}
		if s := summary(); len(s.ChangesRequested) != 1 || len(s.Approvals) != 0 {
			t.Fatalf("after changes requested: %+v", s)
		}
		if _, err := f.pulls.Review(ctx, f.repo, pr.Number, bob, pull.ReviewApprove, ""); err != nil {
			t.Fatal(err)
		}
		if s := summary(); !slices.Equal(s.Approvals, []int64{bob.ID}) || len(s.ChangesRequested) != 0 {
			t.Fatalf("after the approval: %+v", s)
		}
		// A push makes the approval stale.
		f.git("checkout", "-q", "a")
		next := f.commit(map[string]string{"a.txt": "aa\n"}, "more")
		f.git("push", "-q", f.bare, "a")
		f.git("checkout", "-q", "main")
		f.pulls.OnPush(ctx, f.repo, f.alice, []git.RefUpdate{{Old: pr.HeadSHA, New: next, Ref: "refs/heads/a"}})
		if s := summary(); len(s.Approvals) != 0 || !slices.Equal(s.Stale, []int64{bob.ID}) {
			t.Fatalf("after a push: %+v", s)
		}
		if _, err := f.pulls.Close(ctx, f.repo, pr.Number); err != nil {
			t.Fatal(err)
		}
		_, err = f.pulls.Review(ctx, f.repo, pr.Number, bob, pull.ReviewApprove, "")
		wantKind(t, "a review of a closed request", err, fault.KindConflict)
		if want := []string{"changes_requested by bob", "approved by bob"}; !slices.Equal(fired, want) {
			t.Fatalf("events %q, want %q", fired, want)
		}
	})
}

// A request from a fork: its commits come into the target's object store, its pre-merged
// commit holds both sides, a push to the fork re-syncs it and fires Pushed on the target, and
// while its author is outside the target's team it is held until a maintainer approves its
// head to run, again after every push.
func TestRequestFromAFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		f.pulls.UseRoles(f.w.Orgs)
		var fired []string
		f.pulls.OnEvent(func(_ context.Context, ev pull.Event) { fired = append(fired, ev.What+"@"+ev.Repo.Name) })

		// bob, of another team, forks acme/model and pushes a branch to his fork.
		bob := f.w.Signup(t, "bob")
		theirs, err := f.w.Orgs.Create(ctx, bob, "bobs")
		if err != nil {
			t.Fatal(err)
		}
		fork, err := f.w.Repos.Fork(ctx, f.repo, theirs, "model-fork")
		if err != nil {
			t.Fatal(err)
		}
		forkBare := f.w.Repos.Path(fork)
		f.git("checkout", "-q", "-B", "tune", "main")
		first := f.commit(map[string]string{"train.py": "lr = 0.01\nepochs = 10\n"}, "tune lr")
		f.git("push", "-q", forkBare, "tune")
		f.git("checkout", "-q", "main")
		if f.ref("refs/heads/tune") != "" {
			t.Fatal("the fork's branch is in the target")
		}

		// A repository that is not a fork of the target is refused.
		stranger, err := f.w.Repos.Create(ctx, theirs, "other", repo.Public, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		bobP := pull.Person{ID: bob.ID, Name: "bob", Email: "bob@example.com"}
		_, err = f.pulls.Open(ctx, f.repo, bobP, pull.OpenInput{Source: "tune", Target: "main", Title: "x", From: stranger})
		wantKind(t, "a request from a repository that is not a fork", err, fault.KindInvalid)

		pr, err := f.pulls.Open(ctx, f.repo, bobP, pull.OpenInput{Source: "tune", Target: "main", Title: "Lower lr", From: fork})
		if err != nil {
			t.Fatal(err)
		}
		if pr.SourceRepoID != fork.ID || pr.HeadSHA != first || f.ref(pull.HeadRef(pr.Number)) != first || pr.MergeSHA == "" {
			t.Fatalf("request %+v", pr)
		}
		if got := f.show(pr.MergeSHA, "train.py"); got != "lr = 0.01\nepochs = 10\n" {
			t.Errorf("the pre-merged commit's train.py %q", got)
		}
		held, err := f.pulls.RunHeld(ctx, f.repo, pr)
		if err != nil || !held {
			t.Errorf("an outsider's fork request is not held: %v, %v", held, err)
		}

		// A maintainer approves it to run: RunApproved fires, and it is no longer held.
		fired = nil
		pr, err = f.pulls.ApproveRun(ctx, f.repo, pr.Number, f.alice)
		if err != nil {
			t.Fatal(err)
		}
		if held, _ := f.pulls.RunHeld(ctx, f.repo, pr); held || len(fired) != 1 || fired[0] != pull.RunApproved+"@model" {
			t.Errorf("after approval: held %v, fired %v", held, fired)
		}
		_, err = f.pulls.ApproveRun(ctx, f.repo, pr.Number, f.alice)
		wantKind(t, "approving twice", err, fault.KindConflict)

		// bob pushes to his fork: the request follows, fires Pushed on the target, and is held
		// again for the new head.
		f.git("checkout", "-q", "tune")
		second := f.commit(map[string]string{"README.md": "model, tuned\n"}, "readme")
		f.git("push", "-q", forkBare, "tune")
		f.git("checkout", "-q", "main")
		fired = nil
		f.pulls.OnPush(ctx, fork, bobP, []git.RefUpdate{{Old: first, New: second, Ref: "refs/heads/tune"}})
		pr, err = f.pulls.Get(ctx, f.repo, pr.Number)
		if err != nil {
			t.Fatal(err)
		}
		if pr.HeadSHA != second || f.ref(pull.HeadRef(pr.Number)) != second || len(fired) == 0 || fired[0] != pull.Pushed+"@model" {
			t.Errorf("after the fork's push: head %s (want %s), fired %v", pr.HeadSHA, second, fired)
		}
		if held, _ := f.pulls.RunHeld(ctx, f.repo, pr); !held {
			t.Error("a new head of an outsider's fork request runs without a new approval")
		}
		// A member's request from a fork is not held.
		acme, err := f.w.Orgs.ByID(ctx, f.repo.OrgID)
		if err != nil {
			t.Fatal(err)
		}
		alice, err := f.w.Users.UserByID(ctx, f.alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := f.w.Orgs.Invite(ctx, acme, alice, org.Owner, "bob", "", org.Developer)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.w.Orgs.RespondInvitation(ctx, bob, inv.ID, true); err != nil {
			t.Fatal(err)
		}
		if held, _ := f.pulls.RunHeld(ctx, f.repo, pr); held {
			t.Error("a team member's fork request is held")
		}
		// It merges like any other: the target gets the fork's commits.
		done, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{Mode: pull.ModeMerge, DeleteSource: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.show(done.Target.New, "README.md"); got != "model, tuned\n" || done.SourceDeleted {
			t.Errorf("merged README %q, source deleted %v (a fork's branch is not the target's to delete)", got, done.SourceDeleted)
		}
	})
}

// Deleting a fork leaves the requests it opened against another team's repository, with their
// reviews and comments: the target keeps the proposed commits (refs/pull/N/head), so the
// request still reads, merges and closes; it only never syncs again, and cannot be reopened.
func TestAForksRequestOutlivesTheFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		bob := f.w.Signup(t, "bob")
		theirs, err := f.w.Orgs.Create(ctx, bob, "bobs")
		if err != nil {
			t.Fatal(err)
		}
		bobP := pull.Person{ID: bob.ID, Name: "bob", Email: "bob@example.com"}
		open := func(fork *repo.Repo, branch, file string) *pull.Request {
			t.Helper()
			f.git("checkout", "-q", "-B", branch, "main")
			f.commit(map[string]string{file: branch + "\n"}, branch)
			f.git("push", "-q", f.w.Repos.Path(fork), branch)
			f.git("checkout", "-q", "main")
			pr, err := f.pulls.Open(ctx, f.repo, bobP, pull.OpenInput{Source: branch, Target: "main", Title: branch, From: fork})
			if err != nil {
				t.Fatal(err)
			}
			return pr
		}
		fork, err := f.w.Repos.Fork(ctx, f.repo, theirs, "model-fork")
		if err != nil {
			t.Fatal(err)
		}
		kept := open(fork, "tune", "tune.txt")
		closing := open(fork, "other", "other.txt")
		if _, err := f.pulls.Comment(ctx, f.repo, kept.Number, f.alice, pull.CommentInput{Body: "looks right"}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.Review(ctx, f.repo, kept.Number, f.alice, pull.ReviewApprove, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.Close(ctx, f.repo, closing.Number); err != nil {
			t.Fatal(err)
		}

		if err := f.w.Repos.Delete(ctx, fork); err != nil {
			t.Fatal(err)
		}
		pr, err := f.pulls.Get(ctx, f.repo, kept.Number)
		if err != nil {
			t.Fatalf("the request went with the fork: %v", err)
		}
		if pr.SourceRepoID != 0 || pr.State != pull.StateOpen || pr.HeadSHA != kept.HeadSHA {
			t.Errorf("after the fork's deletion: %+v", pr)
		}
		comments, err := f.pulls.Comments(ctx, pr)
		if err != nil || len(comments) != 1 {
			t.Errorf("comments %v, %v", comments, err)
		}
		reviews, err := f.pulls.Reviews(ctx, pr)
		if err != nil || len(reviews) != 1 {
			t.Errorf("reviews %v, %v", reviews, err)
		}
		if synced, err := f.pulls.Sync(ctx, f.repo, pr); synced || err != nil {
			t.Errorf("a request without its fork synced: %v, %v", synced, err)
		}
		_, err = f.pulls.Reopen(ctx, f.repo, closing.Number, f.alice)
		wantKind(t, "reopening a request whose fork is gone", err, fault.KindConflict)
		// The target moves on: the request follows it from the head it kept.
		f.commit(map[string]string{"main.txt": "moved\n"}, "main moves")
		f.git("push", "-q", f.bare, "main")
		if synced, err := f.pulls.Sync(ctx, f.repo, pr); synced || err != nil || pr.BaseSHA != f.ref("refs/heads/main") {
			t.Errorf("a request without its fork after its target moved: synced %v, %v, base %s", synced, err, pr.BaseSHA)
		}

		done, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{Mode: pull.ModeMerge})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.show(done.Target.New, "tune.txt"); got != "tune\n" || f.show(done.Target.New, "main.txt") != "moved\n" {
			t.Errorf("merged tune.txt %q", got)
		}
		if msg := f.git("--git-dir="+f.bare, "log", "-1", "--format=%s", done.Target.New); msg != "Merge pull request #1 from deleted-fork/tune" {
			t.Errorf("the merge message %q", msg)
		}
	})
}

// What a merge refuses or takes care of: a protected source branch is not deleted (the whole
// merge is refused first), a message git cannot store is refused and a blank one gives the
// default, a deleted source branch closes its request, and merges of several requests at once
// all land (each one that finds main moved starts again).
func TestMergeEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		if _, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "keep"}); err != nil {
			t.Fatal(err)
		}
		f.branch("keep", map[string]string{"keep.txt": "k\n"})
		keep, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "keep", Target: "main", Title: "Keep"})
		if err != nil {
			t.Fatal(err)
		}
		main := f.ref("refs/heads/main")
		_, err = f.pulls.Merge(ctx, f.repo, keep.Number, f.alice, pull.MergeInput{DeleteSource: true})
		wantKind(t, "deleting a protected source branch", err, fault.KindInvalid)
		if f.ref("refs/heads/main") != main || f.ref("refs/heads/keep") == "" {
			t.Fatal("a refused merge moved main or deleted the protected branch")
		}
		_, err = f.pulls.Merge(ctx, f.repo, keep.Number, f.alice, pull.MergeInput{Message: "bad\x00nul"})
		wantKind(t, "a NUL in the message", err, fault.KindInvalid)
		m, err := f.pulls.Merge(ctx, f.repo, keep.Number, f.alice, pull.MergeInput{Message: "  \n "})
		if err != nil {
			t.Fatal(err)
		}
		if msg := f.git("--git-dir="+f.bare, "log", "-1", "--format=%s", m.Target.New); msg != "Merge pull request #1 from keep" {
			t.Errorf("a blank message gave %q", msg)
		}

		// git push :gone closes the request from gone.
		gone := f.branch("gone", map[string]string{"gone.txt": "g\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "gone", Target: "main", Title: "Gone"})
		if err != nil {
			t.Fatal(err)
		}
		f.git("push", "-q", f.bare, ":gone")
		f.pulls.OnPush(ctx, f.repo, f.alice, []git.RefUpdate{{Old: gone, New: git.ZeroSHA, Ref: "refs/heads/gone"}})
		if pr, err = f.pulls.Get(ctx, f.repo, pr.Number); err != nil || pr.State != pull.StateClosed || pr.ClosedAt == nil {
			t.Fatalf("after its source branch was deleted: %+v %v", pr, err)
		}

		// Four requests merged at once: every one lands.
		f.git("fetch", "-q", f.bare, "main")
		f.git("checkout", "-q", "-B", "main", "FETCH_HEAD")
		var numbers []int64
		for i := range 4 {
			name := "par-" + strconv.Itoa(i)
			f.branch(name, map[string]string{name + ".txt": name + "\n"})
			pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: name, Target: "main", Title: name})
			if err != nil {
				t.Fatal(err)
			}
			numbers = append(numbers, pr.Number)
		}
		errs := make(chan error, len(numbers))
		for _, n := range numbers {
			go func() {
				_, err := f.pulls.Merge(ctx, f.repo, n, f.alice, pull.MergeInput{Mode: pull.ModeSquash})
				errs <- err
			}()
		}
		for range numbers {
			if err := <-errs; err != nil {
				t.Errorf("a merge beside others: %v", err)
			}
		}
		tip := f.ref("refs/heads/main")
		for i := range 4 {
			name := "par-" + strconv.Itoa(i)
			if f.show(tip, name+".txt") != name+"\n" {
				t.Errorf("main lacks %s.txt", name)
			}
		}
	})
}
