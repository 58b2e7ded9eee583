package pull

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// The merge gate: what must hold before a request merges, each unmet condition named.
//
//	conflicts            the source and target conflict (always)
//	mode                 the repository refuses this merge mode (Settings, always)
//	approvals            fewer approvals of the current head than the target's rule asks;
//	                     with dismiss_stale_approvals an approval of an older head does not count
//	changes_requested    a reviewer's last word asks for changes (a rule that asks for approvals)
//	checks_missing       no pull_request build ran on the current head (a rule with checks)
//	checks_pending       a required pipeline is queued or running
//	checks_failed        a required pipeline failed, was cancelled or is not in the build
//
// Merge refuses with a 409 whose details list them all. pull_request.mergeable fires once per
// source head, the first time a request to a protected branch passes the gate: after an
// approval, after one of its pull_request pipelines ends (app.New), and after a push re-syncs it.

// Check is one pipeline of a request's pull_request build, as the merge gate reads it.
type Check struct {
	Name   string `json:"name"`   // the pipeline's name
	Status string `json:"status"` // queued, running, success, failed, cancelled, terminated or skipped
	Build  int64  `json:"build"`  // the build's number in its repository
}

// Checks reads a request's checks: the pipelines of the newest pull_request build of request
// number of repoID that ran on source head head (found false when none did). build.Service
// implements it; app.New wires it.
type Checks interface {
	PullChecks(ctx context.Context, repoID, number int64, head string) (checks []Check, found bool, err error)
}

// UseChecks gives the service the reader of its requests' checks. It is wiring (app.New);
// without it every required check is missing.
func (s *Service) UseChecks(c Checks) { s.checks = c }

// Unmet is one condition of the merge gate that does not hold.
type Unmet struct {
	Code    string `json:"code"`
	Rule    string `json:"rule,omitempty"` // the branch rule's pattern, for the rule's conditions
	Message string `json:"message"`
}

// Gate is where a request stands against the merge gate.
type Gate struct {
	// Rule is the target branch's rule; nil when the target is not protected.
	Rule   *Rule
	Unmet  []Unmet
	Checks []Check
}

// Passed reports whether nothing is unmet.
func (g *Gate) Passed() bool { return len(g.Unmet) == 0 }

// passed reports whether a check's status counts as success for a required check: a skipped
// pipeline (its if or ifModify said no) did what was asked of it, as GitHub counts skipped
// checks.
func passed(status string) bool { return status == "success" || status == "skipped" }

func pending(status string) bool { return status == "queued" || status == "running" }

// Gate reads pr (as last synced) against the rule of its target and the repository's settings.
// mode "" skips the mode condition (the gate as the request page shows it).
func (s *Service) Gate(ctx context.Context, r *repo.Repo, pr *Request, mode string) (*Gate, error) {
	g := &Gate{}
	if pr.MergeSHA == "" {
		g.Unmet = append(g.Unmet, Unmet{Code: "conflicts", Message: "the source conflicts with " + pr.TargetBranch + " in " + strings.Join(pr.ConflictPaths(), ", ")})
	}
	if mode != "" {
		set, err := s.Settings(ctx, r)
		if err != nil {
			return nil, err
		}
		if !set.Allows(mode) {
			g.Unmet = append(g.Unmet, Unmet{Code: "mode", Message: fmt.Sprintf("this repository does not allow %s merges; it allows %s", mode, strings.Join(set.Modes(), ", "))})
		}
	}
	// The checks of the head, whether or not a rule requires them: the request's page shows them.
	found := false
	if s.checks != nil {
		var err error
		if g.Checks, found, err = s.checks.PullChecks(ctx, r.ID, pr.Number, pr.HeadSHA); err != nil {
			return nil, err
		}
	}
	rule, err := s.RuleFor(ctx, r.ID, pr.TargetBranch)
	if err != nil || rule == nil {
		return g, err
	}
	g.Rule = rule
	name := fmt.Sprintf("the branch rule %q", rule.Pattern)
	if rule.RequiredApprovals > 0 {
		reviews, err := s.Reviews(ctx, pr)
		if err != nil {
			return nil, err
		}
		sum := Summarize(pr, reviews)
		have := len(sum.Approvals)
		if !rule.DismissStale {
			have += len(sum.Stale)
		}
		if have < rule.RequiredApprovals {
			msg := fmt.Sprintf("%s asks for %d approving review(s); it has %d", name, rule.RequiredApprovals, have)
			if rule.DismissStale && len(sum.Stale) > 0 {
				msg += fmt.Sprintf(" (%d given before the last push do not count)", len(sum.Stale))
			}
			g.Unmet = append(g.Unmet, Unmet{Code: "approvals", Rule: rule.Pattern, Message: msg})
		}
		if len(sum.ChangesRequested) > 0 {
			g.Unmet = append(g.Unmet, Unmet{Code: "changes_requested", Rule: rule.Pattern,
				Message: fmt.Sprintf("%d reviewer(s) asked for changes: %s needs them to approve first", len(sum.ChangesRequested), name)})
		}
	}
	required := rule.Checks()
	if len(required) == 0 {
		return g, nil
	}
	checks := g.Checks
	if !found {
		g.Unmet = append(g.Unmet, Unmet{Code: "checks_missing", Rule: rule.Pattern,
			Message: fmt.Sprintf("%s requires checks (%s), and no pull_request build ran on the head %s", name, strings.Join(required, ", "), short(pr.HeadSHA))})
		return g, nil
	}
	var waiting, failing []string
	judge := func(c Check) {
		switch {
		case passed(c.Status):
		case pending(c.Status):
			waiting = append(waiting, c.Name)
		default:
			failing = append(failing, c.Name+" ("+c.Status+")")
		}
	}
	if slices.Contains(required, "*") {
		for _, c := range checks {
			judge(c)
		}
		if len(checks) == 0 {
			failing = append(failing, "the pull_request build has no pipelines")
		}
	}
	for _, want := range required {
		if want == "*" {
			continue
		}
		i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == want })
		if i < 0 {
			failing = append(failing, want+" (not in the build)")
			continue
		}
		if !slices.Contains(required, "*") {
			judge(checks[i])
		}
	}
	if len(failing) > 0 {
		g.Unmet = append(g.Unmet, Unmet{Code: "checks_failed", Rule: rule.Pattern, Message: fmt.Sprintf("%s requires checks that did not pass: %s", name, strings.Join(failing, ", "))})
	}
	if len(waiting) > 0 {
		g.Unmet = append(g.Unmet, Unmet{Code: "checks_pending", Rule: rule.Pattern, Message: fmt.Sprintf("%s requires checks still running: %s", name, strings.Join(waiting, ", "))})
	}
	return g, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// refused is the 409 of a merge the gate stops, every unmet condition in its details.
func refused(number int64, unmet []Unmet) error {
	msgs := make([]string, len(unmet))
	for i, u := range unmet {
		msgs[i] = u.Message
	}
	e := fault.Conflict("pull request #%d cannot merge yet: %s", number, strings.Join(msgs, "; "))
	e.Details = map[string]any{"unmet": unmet}
	return e
}

// Mergeable is the pull_request.mergeable event: a request to a protected branch passed the
// gate on its current head. EventMergeable is its event's name in .cnb.yml.
const (
	Mergeable      = "mergeable"
	EventMergeable = "pull_request.mergeable"
)

// Recheck fires pull_request.mergeable for an open request to a protected branch (one whose rule
// asks for approvals, as CNB's event asks for review) that passes the gate, once per source
// head: the request row's mergeable_sha is set from another value, fenced, so two rechecks at
// once fire it once. by is who did what led here (an approver, or the request's author when a
// check ended).
func (s *Service) Recheck(ctx context.Context, r *repo.Repo, number int64, by Person) (bool, error) {
	pr, err := s.Get(ctx, r, number)
	if err != nil || pr.State != StateOpen || pr.MergeableSHA == pr.HeadSHA {
		return false, err
	}
	if by.ID == 0 {
		by = Person{ID: pr.AuthorID} // a check ended: the request's author "did" it
	}
	g, err := s.Gate(ctx, r, pr, "")
	if err != nil || g.Rule == nil || g.Rule.RequiredApprovals == 0 || !g.Passed() {
		return false, err
	}
	res := s.db.WithContext(ctx).Model(&Request{}).Where("id = ? AND state = ? AND head_sha = ? AND mergeable_sha <> ?", pr.ID, StateOpen, pr.HeadSHA, pr.HeadSHA).
		Update("mergeable_sha", pr.HeadSHA)
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error
	}
	pr.MergeableSHA = pr.HeadSHA
	s.fire(ctx, Event{What: Mergeable, Repo: r, Request: pr, By: by})
	return true, nil
}

// Settings are a repository's merge settings (table pull_settings; no row: every mode allowed).
type Settings struct {
	RepoID      int64     `gorm:"primaryKey;autoIncrement:false" json:"-"`
	AllowMerge  bool      `gorm:"not null" json:"allow_merge"`
	AllowSquash bool      `gorm:"not null" json:"allow_squash"`
	AllowRebase bool      `gorm:"not null" json:"allow_rebase"`
	UpdatedAt   time.Time `gorm:"not null" json:"updated_at"`
}

// TableName is the table of Settings.
func (Settings) TableName() string { return "pull_settings" }

// Allows reports whether mode is allowed.
func (st *Settings) Allows(mode string) bool {
	switch mode {
	case ModeMerge:
		return st.AllowMerge
	case ModeSquash:
		return st.AllowSquash
	case ModeRebase:
		return st.AllowRebase
	}
	return false
}

// Modes are the allowed modes, in the order git:auto-merge's "auto" tries them.
func (st *Settings) Modes() []string {
	var out []string
	for _, m := range []string{ModeMerge, ModeSquash, ModeRebase} {
		if st.Allows(m) {
			out = append(out, m)
		}
	}
	return out
}

// Settings returns r's merge settings.
func (s *Service) Settings(ctx context.Context, r *repo.Repo) (*Settings, error) {
	var st Settings
	err := s.db.WithContext(ctx).Where("repo_id = ?", r.ID).Take(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return &Settings{RepoID: r.ID, AllowMerge: true, AllowSquash: true, AllowRebase: true}, nil
	}
	return &st, err
}

// SetSettings replaces r's merge settings; at least one mode stays allowed.
func (s *Service) SetSettings(ctx context.Context, r *repo.Repo, in Settings) (*Settings, error) {
	if !in.AllowMerge && !in.AllowSquash && !in.AllowRebase {
		return nil, fault.Invalid("allow_merge", "allow at least one of merge, squash and rebase")
	}
	in.RepoID, in.UpdatedAt = r.ID, s.clock.Now().UTC()
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "repo_id"}}, UpdateAll: true}).Create(&in).Error; err != nil {
		return nil, err
	}
	return &in, nil
}

// recheck is Recheck after something that happened already (an approval, a push): a failure is
// logged, not returned.
func (s *Service) recheck(ctx context.Context, r *repo.Repo, number int64, by Person) {
	if _, err := s.Recheck(ctx, r, number, by); err != nil {
		s.log.ErrorContext(ctx, "pull requests: merge gate", "repo_id", r.ID, "pull", number, "err", err)
	}
}

// Check states of a request's head, for lists (ChecksState).
const (
	ChecksNone    = ""        // no pull_request build on the head and no status
	ChecksPending = "pending" // one still queued or running
	ChecksFailure = "failure" // one failed, was cancelled or errored
	ChecksSuccess = "success" // all passed (or were skipped)
)

// ChecksState sums up the checks of pr's head in one word, as a list shows it: every pipeline of
// its newest pull_request build on the head and every status there, whether required or not.
func (s *Service) ChecksState(ctx context.Context, r *repo.Repo, pr *Request) (string, error) {
	if s.checks == nil {
		return ChecksNone, nil
	}
	cs, found, err := s.checks.PullChecks(ctx, r.ID, pr.Number, pr.HeadSHA)
	if err != nil || !found {
		return ChecksNone, err
	}
	state := ChecksSuccess
	for _, c := range cs {
		switch {
		case passed(c.Status):
		case pending(c.Status):
			if state == ChecksSuccess {
				state = ChecksPending
			}
		default:
			return ChecksFailure, nil
		}
	}
	return state, nil
}
