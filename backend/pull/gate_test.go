package pull_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// checksByHead stands in for build.Service's reading of a request's pull_request pipelines, so
// the gate's judgement can be walked through every state here; the real reader is exercised by
// e2e/pulls_test.go.
type checksByHead struct {
	mu   sync.Mutex
	runs map[string][]pull.Check
}

func (c *checksByHead) PullChecks(_ context.Context, _, _ int64, head string) ([]pull.Check, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, ok := c.runs[head]
	return slices.Clone(cs), ok, nil
}

func (c *checksByHead) set(head string, cs ...pull.Check) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[head] = cs
}

// codes are the unmet conditions of a merge refusal, from its details.
func codes(t *testing.T, err error) []string {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.KindConflict {
		t.Fatalf("want a 409 naming the unmet rules, got %v", err)
	}
	unmet, _ := fe.Details["unmet"].([]pull.Unmet)
	out := make([]string, len(unmet))
	for i, u := range unmet {
		out[i] = u.Code
	}
	return out
}

// The merge gate of a protected main (1 approval, the pipeline "train" must pass, approvals of
// older heads dismissed): a merge is refused naming every unmet rule and changes nothing, the
// request page's gate says the same, pull_request.mergeable fires once per head when the last
// condition is met, and the repository's merge modes are enforced, auto taking the first.
func TestMergeGate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		checks := &checksByHead{runs: map[string][]pull.Check{}}
		f.pulls.UseChecks(checks)
		bobUser, carolUser := f.w.Signup(t, "bob"), f.w.Signup(t, "carol")
		bob := pull.Person{ID: bobUser.ID, Name: "bob", Email: "bob@example.com"}
		carol := pull.Person{ID: carolUser.ID, Name: "carol", Email: "carol@example.com"}
		var mergeable []string
		f.pulls.OnEvent(func(_ context.Context, ev pull.Event) {
			if ev.What == pull.Mergeable {
				mergeable = append(mergeable, ev.Request.HeadSHA[:7]+" by "+ev.By.Name)
			}
		})
		if _, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "main", RequiredApprovals: 1, RequiredChecks: []string{"train"},
			DismissStale: true, PushRoles: nil}); err != nil {
			t.Fatal(err)
		}
		head := f.branch("a", map[string]string{"a.txt": "a\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		mainBefore := f.ref("refs/heads/main")
		merge := func(mode string) error {
			_, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{Mode: mode})
			return err
		}
		gate := func() []string {
			p, err := f.pulls.Get(ctx, f.repo, pr.Number)
			if err != nil {
				t.Fatal(err)
			}
			g, err := f.pulls.Gate(ctx, f.repo, p, "")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, u := range g.Unmet {
				out = append(out, u.Code)
			}
			return out
		}
		steps := []struct {
			name   string
			do     func()
			unmet  []string
			merged bool
		}{
			{"nothing yet", func() {}, []string{"approvals", "checks_missing"}, false},
			{"train queued", func() { checks.set(head, pull.Check{Name: "train", Status: "queued", Build: 1}) }, []string{"approvals", "checks_pending"}, false},
			{"bob approves", func() { mustReview(t, f, pr.Number, bob, pull.ReviewApprove) }, []string{"checks_pending"}, false},
			{"carol asks for changes", func() { mustReview(t, f, pr.Number, carol, pull.ReviewRequestChanges) }, []string{"changes_requested", "checks_pending"}, false},
			{"train fails", func() { checks.set(head, pull.Check{Name: "train", Status: "failed", Build: 1}) }, []string{"changes_requested", "checks_failed"}, false},
			{"carol approves", func() { mustReview(t, f, pr.Number, carol, pull.ReviewApprove) }, []string{"checks_failed"}, false},
			{"a build without train", func() { checks.set(head, pull.Check{Name: "lint", Status: "success", Build: 2}) }, []string{"checks_failed"}, false},
		}
		for _, s := range steps {
			s.do()
			if got := gate(); !slices.Equal(got, s.unmet) {
				t.Fatalf("%s: the gate says %q, want %q", s.name, got, s.unmet)
			}
			if got := codes(t, merge("")); !slices.Equal(got, s.unmet) {
				t.Fatalf("%s: the merge refused with %q, want %q", s.name, got, s.unmet)
			}
			if f.ref("refs/heads/main") != mainBefore {
				t.Fatalf("%s: a refused merge moved main", s.name)
			}
		}
		// The list's one-word state of the head's checks: lint passed, train is not in the build.
		p, _ := f.pulls.Get(ctx, f.repo, pr.Number)
		if st, err := f.pulls.ChecksState(ctx, f.repo, p); err != nil || st != pull.ChecksSuccess {
			t.Fatalf("the checks state with lint green: %q %v", st, err)
		}
		checks.set(head, pull.Check{Name: "lint", Status: "success", Build: 2}, pull.Check{Name: "train", Status: "running", Build: 2})
		if st, _ := f.pulls.ChecksState(ctx, f.repo, p); st != pull.ChecksPending {
			t.Fatalf("the checks state with train running: %q", st)
		}
		checks.set(head, pull.Check{Name: "lint", Status: "failed", Build: 2}, pull.Check{Name: "train", Status: "running", Build: 2})
		if st, _ := f.pulls.ChecksState(ctx, f.repo, p); st != pull.ChecksFailure {
			t.Fatalf("the checks state with lint failed: %q", st)
		}
		checks.set(head, pull.Check{Name: "lint", Status: "success", Build: 2})
		// Lists by reviewer: bob and carol reviewed it, alice did not.
		for who, want := range map[int64]int{bob.ID: 1, carol.ID: 1, f.alice.ID: 0} {
			prs, err := f.pulls.List(ctx, f.repo, pull.Filter{ReviewerID: who}, paging.Page{Limit: 10})
			if err != nil || len(prs) != want {
				t.Fatalf("requests reviewed by %d: %d %v, want %d", who, len(prs), err, want)
			}
		}
		// The 409 says which rule and why, in words.
		err = merge("")
		if msg := err.Error(); !strings.Contains(msg, `the branch rule "main" requires checks that did not pass: train (not in the build)`) {
			t.Fatalf("the refusal's message: %s", msg)
		}
		if len(mergeable) != 0 {
			t.Fatalf("mergeable fired before the gate passed: %q", mergeable)
		}
		// train passes: the recheck of its end fires mergeable, once however often it runs,
		// concurrently or not.
		checks.set(head, pull.Check{Name: "lint", Status: "success", Build: 3}, pull.Check{Name: "train", Status: "success", Build: 3})
		var wg sync.WaitGroup
		fired := make(chan bool, 8)
		for range 8 {
			wg.Go(func() {
				ok, err := f.pulls.Recheck(ctx, f.repo, pr.Number, pull.Person{})
				if err != nil {
					t.Error(err)
				}
				fired <- ok
			})
		}
		wg.Wait()
		close(fired)
		n := 0
		for ok := range fired {
			if ok {
				n++
			}
		}
		if n != 1 || !slices.Equal(mergeable, []string{head[:7] + " by "}) {
			t.Fatalf("mergeable fired %d times: %q", n, mergeable)
		}
		if got := gate(); len(got) != 0 {
			t.Fatalf("the gate after green checks: %q", got)
		}
		// A push: the approvals are of an older head (dismissed) and the new head has no checks.
		f.git("checkout", "-q", "a")
		next := f.commit(map[string]string{"a.txt": "aa\n"}, "more")
		f.git("push", "-q", f.bare, "a")
		f.git("checkout", "-q", "main")
		f.pulls.OnPush(ctx, f.repo, f.alice, []git.RefUpdate{{Old: head, New: next, Ref: "refs/heads/a"}})
		if got := gate(); !slices.Equal(got, []string{"approvals", "checks_missing"}) {
			t.Fatalf("after a push: %q", got)
		}
		checks.set(next, pull.Check{Name: "train", Status: "success", Build: 4})
		mustReview(t, f, pr.Number, bob, pull.ReviewApprove) // the approval's recheck fires for the new head
		if !slices.Equal(mergeable, []string{head[:7] + " by ", next[:7] + " by bob"}) {
			t.Fatalf("mergeable after the new head passed: %q", mergeable)
		}
		// Merge modes: a refused mode is named; auto takes the first allowed.
		if _, err := f.pulls.SetSettings(ctx, f.repo, pull.Settings{}); fault.KindOf(err) != fault.KindInvalid {
			t.Fatalf("no mode allowed: %v", err)
		}
		if _, err := f.pulls.SetSettings(ctx, f.repo, pull.Settings{AllowSquash: true, AllowRebase: true}); err != nil {
			t.Fatal(err)
		}
		if got := codes(t, merge(pull.ModeMerge)); !slices.Equal(got, []string{"mode"}) {
			t.Fatalf("a merge commit where only squash and rebase are allowed: %q", got)
		}
		if f.ref("refs/heads/main") != mainBefore {
			t.Fatal("a refused mode moved main")
		}
		done, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{Mode: pull.ModeAuto})
		if err != nil || done.Request.MergeMode != pull.ModeSquash || f.ref("refs/heads/main") == mainBefore {
			t.Fatalf("auto merge: %+v %v", done, err)
		}
	})
}

// A rule that requires "*" wants every pipeline of the build to pass, and a build with none
// does not count as passing.
func TestMergeGateEveryCheck(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		checks := &checksByHead{runs: map[string][]pull.Check{}}
		f.pulls.UseChecks(checks)
		if _, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "main", RequiredChecks: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		head := f.branch("a", map[string]string{"a.txt": "a\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name   string
			checks []pull.Check
			unmet  []string
		}{
			{"no pipelines", []pull.Check{}, []string{"checks_failed"}},
			{"one failed", []pull.Check{{Name: "a", Status: "success"}, {Name: "b", Status: "cancelled"}}, []string{"checks_failed"}},
			{"one running", []pull.Check{{Name: "a", Status: "running"}, {Name: "b", Status: "skipped"}}, []string{"checks_pending"}},
			{"all passed or skipped", []pull.Check{{Name: "a", Status: "success"}, {Name: "b", Status: "skipped"}}, nil},
		} {
			checks.set(head, c.checks...)
			p, _ := f.pulls.Get(ctx, f.repo, pr.Number)
			g, err := f.pulls.Gate(ctx, f.repo, p, pull.ModeMerge)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range g.Unmet {
				got = append(got, u.Code)
			}
			if !slices.Equal(got, c.unmet) {
				t.Errorf("%s: %q, want %q", c.name, got, c.unmet)
			}
		}
		// Without approvals in its rule, mergeable does not fire (CNB's event is for reviewed
		// branches), though the merge goes through.
		if ok, err := f.pulls.Recheck(ctx, f.repo, pr.Number, f.alice); ok || err != nil {
			t.Fatalf("recheck without a review rule: %v %v", ok, err)
		}
		if _, err := f.pulls.Merge(ctx, f.repo, pr.Number, f.alice, pull.MergeInput{}); err != nil {
			t.Fatal(err)
		}
	})
}

func mustReview(t *testing.T, f *fixture, number int64, by pull.Person, state string) {
	t.Helper()
	body := ""
	if state == pull.ReviewRequestChanges {
		body = "please change"
	}
	if _, err := f.pulls.Review(context.Background(), f.repo, number, by, state, body); err != nil {
		t.Fatal(err)
	}
}
