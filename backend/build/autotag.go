package build

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// auto_tag, the tags page's "auto-generate a tag" button (cnb-reference §3.1): the pipelines the
// default branch's .cnb.yml declares for auto_tag under the default branch's own key (one under
// "$" is ignored, as on CNB) run on the default branch's head. Without them the default runs,
// as CNB's git-auto-tag plugin does: the next semantic version after the highest vX.Y.Z (or
// X.Y.Z) tag, its patch number plus one and its prefix kept, v1.0.0 when there is none, is
// tagged on the default branch's head by the person who pressed, and fires tag_push as a
// pushed tag would.

// AutoTag is what the button did: started Build, or made Tag at Commit (with the builds its
// tag_push started).
type AutoTag struct {
	Build   *Build
	Tag     string
	Commit  string
	TagPush []*Build
}

var semverTag = regexp.MustCompile(`^(v?)(\d+)\.(\d+)\.(\d+)$`)

// NextVersionTag is the tag after the highest semantic version among tags.
func NextVersionTag(tags []string) string {
	best, prefix := [3]int{-1, -1, -1}, "v"
	for _, t := range tags {
		m := semverTag.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		var v [3]int
		ok := true
		for i := range v {
			n, err := strconv.Atoi(m[i+2])
			ok = ok && err == nil
			v[i] = n
		}
		if ok && (v[0] > best[0] || v[0] == best[0] && (v[1] > best[1] || v[1] == best[1] && v[2] > best[2])) {
			best, prefix = v, m[1]
		}
	}
	if best[0] < 0 {
		return "v1.0.0"
	}
	return fmt.Sprintf("%s%d.%d.%d", prefix, best[0], best[1], best[2]+1)
}

// AutoTag presses the button on a's repository as user.
func (s *Service) AutoTag(ctx context.Context, a *repo.Access, user *auth.User) (*AutoTag, error) {
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to tag", a.Org.Name, a.Repo.Name)
	}
	def := a.Repo.DefaultBranch
	b, err := s.createAt(ctx, a.Repo, def, request{repo: a.Repo, org: a.Org, user: user, event: spec.EventAutoTag, branch: def,
		trigger: spec.Trigger{Event: spec.EventAutoTag, Branch: def}})
	if errors.Is(err, git.ErrUnknownRevision) {
		return nil, fault.Conflict("the default branch %s has no commits yet: push one to tag it", def)
	}
	if err != nil {
		return nil, err
	}
	if b != nil {
		return &AutoTag{Build: b, Commit: b.CommitSHA}, nil
	}
	path := s.repos.Path(a.Repo)
	head, err := git.ResolveRef(ctx, path, "refs/heads/"+def)
	if err != nil {
		return nil, err
	}
	tips, err := git.RefTips(ctx, path, "refs/tags/")
	if err != nil {
		return nil, err
	}
	names := make([]string, len(tips))
	for i, t := range tips {
		names[i] = t.Name
	}
	tag := NextVersionTag(names)
	if err := git.UpdateRef(ctx, path, "refs/tags/"+tag, head, git.ZeroSHA); errors.Is(err, git.ErrRefMoved) {
		return nil, fault.Conflict("tag %s was made meanwhile: press again for the next one", tag)
	} else if err != nil {
		return nil, err
	}
	builds := s.OnPush(ctx, a.Repo.ID, user, []git.RefUpdate{{Old: git.ZeroSHA, New: head, Ref: "refs/tags/" + tag}})
	return &AutoTag{Tag: tag, Commit: head, TagPush: builds}, nil
}
