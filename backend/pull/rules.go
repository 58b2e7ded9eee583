package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Branch rules (protected branches). A rule names branches by a glob and says, for them:
//
//	who may push directly     the roles listed (none: every change comes through a pull request)
//	force pushes, deletion    refused unless allowed
//	merging a pull request    N approvals, required checks (pipeline names, or "*": every
//	                          pipeline of the request's build), stale approvals dismissed or not
//
// The push half is enforced in the receive path before any ref moves (Guard, wired to the git
// handler in app.New); the merge half by Merge. Globs are path.Match's, where * stops at "/",
// plus "**" alone for every branch; the rule with the exact name wins, then the longest
// pattern.

// Rule is one branch rule of a repository (table branch_rules).
type Rule struct {
	ID             int64  `gorm:"primaryKey"`
	RepoID         int64  `gorm:"not null"`
	Pattern        string `gorm:"not null"`
	PushRoles      string `gorm:"not null"` // JSON array of the roles that may push directly
	AllowForcePush bool   `gorm:"not null"`
	AllowDeletion  bool   `gorm:"not null"`
	// RequiredApprovals is how many reviewers must approve a request's head.
	RequiredApprovals int `gorm:"not null"`
	// RequiredChecks is a JSON array of pipeline names that must succeed on the request's
	// pre-merged commit; ["*"] is every pipeline of its pull_request build.
	RequiredChecks string `gorm:"not null"`
	// DismissStale makes a push to the source void the approvals given before it.
	DismissStale bool      `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

// TableName is the table of Rule.
func (Rule) TableName() string { return "branch_rules" }

// Roles are the roles that may push directly.
func (r *Rule) Roles() []org.Role {
	var out []org.Role
	json.Unmarshal([]byte(r.PushRoles), &out)
	return out
}

// Checks are the required checks.
func (r *Rule) Checks() []string {
	var out []string
	json.Unmarshal([]byte(r.RequiredChecks), &out)
	return out
}

// RuleInput is a rule as its admins set it (the body of PUT …/branch-rules).
type RuleInput struct {
	Pattern           string     `json:"pattern"`
	PushRoles         []org.Role `json:"push_roles"`
	AllowForcePush    bool       `json:"allow_force_push"`
	AllowDeletion     bool       `json:"allow_deletion"`
	RequiredApprovals int        `json:"required_approvals"`
	RequiredChecks    []string   `json:"required_checks"`
	DismissStale      bool       `json:"dismiss_stale_approvals"`
}

// MaxApprovals bounds RequiredApprovals.
const MaxApprovals = 10

func (in RuleInput) check() error {
	switch {
	case in.Pattern == "" || len(in.Pattern) > 255 || strings.ContainsAny(in.Pattern, " \t\n\r\x00") || strings.HasPrefix(in.Pattern, "refs/"):
		return fault.Invalid("pattern", "a pattern is a branch name or glob (main, release/*), not %q", in.Pattern)
	case in.Pattern != "**":
		if _, err := path.Match(in.Pattern, ""); err != nil {
			return fault.Invalid("pattern", "%q is not a valid glob: %v", in.Pattern, err)
		}
	}
	for _, r := range in.PushRoles {
		if r != org.Owner && r != org.Admin && r != org.Developer {
			return fault.Invalid("push_roles", "roles that may push are owner, admin and developer, not %q", r)
		}
	}
	if in.RequiredApprovals < 0 || in.RequiredApprovals > MaxApprovals {
		return fault.Invalid("required_approvals", "required approvals are 0 to %d", MaxApprovals)
	}
	for _, c := range in.RequiredChecks {
		if strings.TrimSpace(c) == "" || len(c) > 255 {
			return fault.Invalid("required_checks", "a required check is a pipeline name, or * for every pipeline")
		}
	}
	return nil
}

// SetRule creates the rule of in.Pattern, or replaces it.
func (s *Service) SetRule(ctx context.Context, r *repo.Repo, in RuleInput) (*Rule, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	roles, _ := json.Marshal(append([]org.Role{}, in.PushRoles...))
	checks, _ := json.Marshal(append([]string{}, in.RequiredChecks...))
	now := s.clock.Now().UTC()
	rule := Rule{RepoID: r.ID, Pattern: in.Pattern, PushRoles: string(roles), AllowForcePush: in.AllowForcePush,
		AllowDeletion: in.AllowDeletion, RequiredApprovals: in.RequiredApprovals, RequiredChecks: string(checks),
		DismissStale: in.DismissStale, CreatedAt: now, UpdatedAt: now}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var old Rule
		err := tx.Where("repo_id = ? AND pattern = ?", r.ID, in.Pattern).Take(&old).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return tx.Create(&rule).Error
		case err != nil:
			return err
		}
		rule.ID, rule.CreatedAt = old.ID, old.CreatedAt
		return tx.Save(&rule).Error
	})
	if err != nil {
		return nil, err
	}
	return &rule, nil
}

// Rules returns r's branch rules by pattern.
func (s *Service) Rules(ctx context.Context, r *repo.Repo) ([]Rule, error) {
	var out []Rule
	err := s.db.WithContext(ctx).Where("repo_id = ?", r.ID).Order("pattern").Find(&out).Error
	return out, err
}

// DeleteRule removes rule id of r.
func (s *Service) DeleteRule(ctx context.Context, r *repo.Repo, id int64) error {
	res := s.db.WithContext(ctx).Where("repo_id = ? AND id = ?", r.ID, id).Delete(&Rule{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("branch rule %d not found", id)
	}
	return nil
}

// matches reports whether pattern names branch.
func matches(pattern, branch string) bool {
	if pattern == "**" {
		return true
	}
	ok, _ := path.Match(pattern, branch)
	return ok
}

// ruleFor is the rule of branch among rules: the exact one, else the longest matching pattern.
func ruleFor(rules []Rule, branch string) *Rule {
	var best *Rule
	for i := range rules {
		r := &rules[i]
		switch {
		case r.Pattern == branch:
			return r
		case matches(r.Pattern, branch) && (best == nil || len(r.Pattern) > len(best.Pattern)):
			best = r
		}
	}
	return best
}

// RuleFor returns the rule of a branch of the repository, or nil when none protects it.
func (s *Service) RuleFor(ctx context.Context, repoID int64, branch string) (*Rule, error) {
	var rules []Rule
	if err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Find(&rules).Error; err != nil {
		return nil, err
	}
	return ruleFor(rules, branch), nil
}

// Guard judges a push to repoID by someone of role in its team (role "" for a deploy token or
// a non-member): a protected branch is created, moved or deleted only as its rule allows, and
// where a direct push is allowed but force pushes are not, it is held to fast-forwards.
func (s *Service) Guard(ctx context.Context, repoID int64, role org.Role, updates []git.RefUpdate) (git.Verdict, error) {
	v := git.Verdict{Refused: map[string]string{}, FastForwardOnly: map[string]string{}}
	var rules []Rule
	if err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Find(&rules).Error; err != nil {
		return v, err
	}
	if len(rules) == 0 {
		return v, nil
	}
	for _, u := range updates {
		branch, ok := strings.CutPrefix(u.Ref, "refs/heads/")
		if !ok {
			continue
		}
		rule := ruleFor(rules, branch)
		if rule == nil {
			continue
		}
		name := fmt.Sprintf("the branch rule %q", rule.Pattern)
		switch {
		case git.IsZeroSHA(u.New) && !rule.AllowDeletion:
			v.Refused[u.Ref] = fmt.Sprintf("%s protects %s: it cannot be deleted", name, branch)
		case git.IsZeroSHA(u.New):
		case !slices.Contains(rule.Roles(), role):
			v.Refused[u.Ref] = fmt.Sprintf("%s protects %s: changes reach it through a pull request", name, branch)
		case !rule.AllowForcePush:
			v.FastForwardOnly[u.Ref] = fmt.Sprintf("%s protects %s: no force pushes", name, branch)
		}
	}
	return v, nil
}
