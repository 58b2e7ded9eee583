package pull_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Branch rules: what they refuse, the rule that applies to a branch (exact name, then the
// longest glob), who may push, and the push verdicts the git handler enforces.
func TestBranchRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		for _, c := range []struct {
			name string
			in   pull.RuleInput
		}{
			{"no pattern", pull.RuleInput{}},
			{"a full ref", pull.RuleInput{Pattern: "refs/heads/main"}},
			{"a broken glob", pull.RuleInput{Pattern: "release/["}},
			{"a reporter may push", pull.RuleInput{Pattern: "main", PushRoles: []org.Role{org.Reporter}}},
			{"too many approvals", pull.RuleInput{Pattern: "main", RequiredApprovals: pull.MaxApprovals + 1}},
			{"negative approvals", pull.RuleInput{Pattern: "main", RequiredApprovals: -1}},
			{"an empty check", pull.RuleInput{Pattern: "main", RequiredChecks: []string{" "}}},
		} {
			_, err := f.pulls.SetRule(ctx, f.repo, c.in)
			wantKind(t, c.name, err, fault.KindInvalid)
		}
		if rules, _ := f.pulls.Rules(ctx, f.repo); len(rules) != 0 {
			t.Fatalf("refused rules were stored: %+v", rules)
		}
		main, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "main", RequiredApprovals: 1, RequiredChecks: []string{"check"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "release/*", PushRoles: []org.Role{org.Owner, org.Admin}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "**", PushRoles: []org.Role{org.Owner, org.Admin, org.Developer},
			AllowForcePush: true, AllowDeletion: true}); err != nil {
			t.Fatal(err)
		}
		// Setting a pattern again replaces its rule.
		again, err := f.pulls.SetRule(ctx, f.repo, pull.RuleInput{Pattern: "main", RequiredApprovals: 2, RequiredChecks: []string{"*"}})
		if err != nil || again.ID != main.ID || again.RequiredApprovals != 2 || again.Checks()[0] != "*" {
			t.Fatalf("replacing main's rule: %+v %v", again, err)
		}
		for branch, want := range map[string]string{"main": "main", "release/1.0": "release/*", "release/1.0/hotfix": "**", "dev": "**"} {
			r, err := f.pulls.RuleFor(ctx, f.repo.ID, branch)
			if err != nil || r == nil || r.Pattern != want {
				t.Errorf("rule of %s: %+v %v, want %s", branch, r, err, want)
			}
		}

		old, next := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
		up := func(ref, o, n string) git.RefUpdate { return git.RefUpdate{Old: o, New: n, Ref: ref} }
		for _, c := range []struct {
			name    string
			role    org.Role
			update  git.RefUpdate
			refused string // a word of the reason, "" when not refused
			ffOnly  bool
		}{
			{"an owner pushes to main", org.Owner, up("refs/heads/main", old, next), "pull request", false},
			{"a developer deletes main", org.Developer, up("refs/heads/main", old, git.ZeroSHA), "cannot be deleted", false},
			{"an admin pushes to a release", org.Admin, up("refs/heads/release/1.0", old, next), "", true},
			{"a developer pushes to a release", org.Developer, up("refs/heads/release/1.0", old, next), "pull request", false},
			{"a developer creates a release", org.Developer, up("refs/heads/release/2.0", git.ZeroSHA, next), "pull request", false},
			{"a deploy token pushes to dev", "", up("refs/heads/dev", old, next), "pull request", false},
			{"a developer force pushes dev", org.Developer, up("refs/heads/dev", old, next), "", false},
			{"a developer deletes dev", org.Developer, up("refs/heads/dev", old, git.ZeroSHA), "", false},
			{"a tag", "", up("refs/tags/v1", git.ZeroSHA, next), "", false},
		} {
			v, err := f.pulls.Guard(ctx, f.repo.ID, c.role, []git.RefUpdate{c.update})
			if err != nil {
				t.Fatal(err)
			}
			why, refused := v.Refused[c.update.Ref]
			_, ff := v.FastForwardOnly[c.update.Ref]
			switch {
			case (c.refused != "") != refused, refused && !strings.Contains(why, c.refused), ff != c.ffOnly:
				t.Errorf("%s: %+v, want refused %q, fast-forward only %v", c.name, v, c.refused, c.ffOnly)
			case refused && !strings.Contains(why, `"`):
				t.Errorf("%s: the reason does not name the rule: %s", c.name, why)
			}
		}
		if err := f.pulls.DeleteRule(ctx, f.repo, main.ID); err != nil {
			t.Fatal(err)
		}
		wantKind(t, "deleting twice", f.pulls.DeleteRule(ctx, f.repo, main.ID), fault.KindNotFound)
	})
}
