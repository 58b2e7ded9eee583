package repo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/internal/envfile"
	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Reader is the pipeline that asks for a file (imports, settingsFrom, optionsFrom), as the
// rules of a secret repository see it.
type Reader struct {
	OrgID, RepoID int64
	Slug          string // org/repo of the reading pipeline
	Event         string
	Branch        string // "" for tag events
	UserID        int64  // who triggered it; 0 for nobody
	PipelineID    int64
	BuildNumber   int64
	// Untrusted: a fork's proposed code (build.Build.Untrusted), which reads no secret file.
	Untrusted bool
}

// FileRef is a file URL taken apart: {any host}/{org}/{repo}/-/blob/{ref}/{path}.
type FileRef struct {
	Org, Repo, Ref, Path string
}

// ParseFileRef reads a file URL of this install, or a CNB-style one whose path names an org and
// repo here (the host is not checked: a file copied from cnb.cool maps to the same org/repo
// here). The ref is one path segment: a branch with a slash is not addressable this way. The
// file's path is what follows the ref's "/", as it is: it must follow the path rule
// (internal/userpath), so …/-/blob/main//etc/x.yml is refused, not read as etc/x.yml.
func ParseFileRef(raw string) (FileRef, error) {
	bad := fault.BadRequest("%q is not a file URL ({host}/{org}/{repo}/-/blob/{ref}/{path})", raw)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return FileRef{}, bad
	}
	repoPart, rest, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/-/blob/")
	if !ok {
		return FileRef{}, bad
	}
	org, name, ok := strings.Cut(repoPart, "/")
	ref, file, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || org == "" || name == "" || strings.Contains(name, "/") || ref == "" {
		return FileRef{}, bad
	}
	if err := userpath.Check(file); err != nil {
		return FileRef{}, err
	}
	return FileRef{Org: org, Repo: name, Ref: ref, Path: file}, nil
}

// ReadImport returns the file raw names for the pipeline rd, with kind (protocol.ImportEnv …)
// and the reading job's image, after checking rd may read it:
//
//   - a file of an ordinary repo: the pipeline's own team's repos and public repos, at any ref
//     (a private repo of another team is a 404, as it would be to its users);
//   - a file of a secret repository: when the file declares allow_slugs, allow_events,
//     allow_branches or allow_images (a glob or a list of globs, the .cnb.yml's glob syntax),
//     each declared rule must match — the pipeline's org/repo, its event, its branch, the image
//     of the job that reads it — and who triggered it does not matter; when it declares none,
//     only a pipeline triggered by an admin or owner of the secret repository's team may read
//     it. Every such read, allowed or refused, is written to secret_file_reads. A refusal is a
//     403 import_refused naming the rule.
func (s *Service) ReadImport(ctx context.Context, rd Reader, raw, kind, image string) (protocol.ImportFile, error) {
	ref, err := ParseFileRef(raw)
	if err != nil {
		return protocol.ImportFile{}, err
	}
	notFound := fault.NotFound("%s: no such file in this install (repo %s/%s, ref %s, path %s)", raw, ref.Org, ref.Repo, ref.Ref, ref.Path)
	o, err := s.orgs.ByName(ctx, ref.Org)
	if err != nil {
		var ae *fault.Error
		if errors.As(err, &ae) && ae.Code == fault.CodeNotFound {
			return protocol.ImportFile{}, notFound
		}
		return protocol.ImportFile{}, err
	}
	var r Repo
	err = s.db.WithContext(ctx).Where("org_id = ? AND lower(name) = lower(?)", o.ID, ref.Repo).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return protocol.ImportFile{}, notFound
	}
	if err != nil {
		return protocol.ImportFile{}, err
	}
	name := path.Base(ref.Path)
	if !r.Secret {
		if r.OrgID != rd.OrgID && r.Visibility != Public {
			return protocol.ImportFile{}, notFound
		}
		b, err := git.ReadFile(ctx, s.Path(&r), ref.Ref, ref.Path)
		if err != nil {
			// The path passed the path rule above, so ErrInvalid is about the ref: one git
			// refuses (an option, a range) names no commit, like an unknown one.
			if errors.Is(err, git.ErrNotExist) || errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
				return protocol.ImportFile{}, notFound
			}
			if errors.Is(err, git.ErrTooLarge) || errors.Is(err, git.ErrNotFile) {
				// The pipeline's author's to fix: the job fails saying so, as for a bad format.
				return protocol.ImportFile{}, fault.Invalid("url", "%s: %v", raw, err)
			}
			return protocol.ImportFile{}, fmt.Errorf("import %s: %w", raw, err)
		}
		return protocol.ImportFile{Name: name, Content: string(b)}, nil
	}
	if ref.Ref != r.DefaultBranch && ref.Ref != "HEAD" {
		return protocol.ImportFile{}, fault.NotFound("%s: secret repository %s/%s keeps one version of each file, on %s; ref %s has none",
			raw, o.Name, r.Name, r.DefaultBranch, ref.Ref)
	}
	if rd.Untrusted {
		audit := SecretFileRead{RepoID: r.ID, Path: ref.Path, Kind: kind, Reader: rd.Slug, PipelineID: rd.PipelineID,
			BuildNumber: rd.BuildNumber, UserID: rd.UserID, Reason: untrustedReason, ReadAt: s.clock.Now().UTC()}
		if err := s.db.WithContext(ctx).Create(&audit).Error; err != nil {
			return protocol.ImportFile{}, fmt.Errorf("audit the read of %s: %w", raw, err)
		}
		return protocol.ImportFile{}, fault.New(fault.KindForbidden, protocol.CodeImportRefused, "%s: %s", raw, untrustedReason)
	}
	f, err := s.SecretFileContent(ctx, &r, ref.Path)
	if err != nil {
		var ae *fault.Error
		if errors.As(err, &ae) && ae.Code == fault.CodeNotFound {
			return protocol.ImportFile{}, notFound
		}
		return protocol.ImportFile{}, err
	}
	allowed, reason, err := s.mayRead(ctx, &r, o.Name+"/"+r.Name, ref.Path, f.Content, rd, image)
	if err != nil {
		return protocol.ImportFile{}, err
	}
	audit := SecretFileRead{RepoID: r.ID, Path: ref.Path, Kind: kind, Reader: rd.Slug, PipelineID: rd.PipelineID,
		BuildNumber: rd.BuildNumber, UserID: rd.UserID, Allowed: allowed, Reason: reason, ReadAt: s.clock.Now().UTC()}
	// The audit is written before the answer: a read that cannot be recorded does not happen.
	if err := s.db.WithContext(ctx).Create(&audit).Error; err != nil {
		return protocol.ImportFile{}, fmt.Errorf("audit the read of %s: %w", raw, err)
	}
	if !allowed {
		return protocol.ImportFile{}, fault.New(fault.KindForbidden, protocol.CodeImportRefused, "%s: %s", raw, reason)
	}
	return protocol.ImportFile{Name: name, Content: f.Content, Secret: true}, nil
}

// untrustedReason is why a fork's proposed code reads no secret file, whatever the file allows.
const untrustedReason = "a pull request from a fork reads no secret files (its code is not the team's own)"

// allowRule is a key of a secret file that says who may read it, and what of the reader it
// matches; allowRules are checked in this order.
type allowRule struct{ key, what string }

var allowRules = []allowRule{{"allow_slugs", "repo"}, {"allow_events", "event"}, {"allow_branches", "branch"}, {"allow_images", "image"}}

// mayRead applies a secret file's rules to rd, and says which rule decided.
func (s *Service) mayRead(ctx context.Context, r *Repo, slug, file, content string, rd Reader, image string) (bool, string, error) {
	obj, err := envfile.Object(path.Base(file), []byte(content))
	if err != nil {
		return false, fmt.Sprintf("the file does not parse: %v", err), nil
	}
	subjects := map[string]string{"repo": rd.Slug, "event": rd.Event, "branch": rd.Branch, "image": image}
	declared := false
	for _, rule := range allowRules {
		v, ok := obj[rule.key]
		if !ok {
			continue
		}
		declared = true
		globs, err := globList(v)
		if err != nil {
			return false, fmt.Sprintf("%s in %s is not a glob or a list of globs: %v", rule.key, file, err), nil
		}
		if subject := subjects[rule.what]; !matchAny(globs, subject) {
			if subject == "" {
				subject = "(none)"
			}
			return false, fmt.Sprintf("refused by %s of %s in %s: %s %s matches none of %s", rule.key, file, slug, rule.what, subject,
				strings.Join(globs, ", ")), nil
		}
	}
	if declared {
		return true, "allowed by the allow_* rules of " + file, nil
	}
	role, err := s.orgs.RoleOf(ctx, r.OrgID, rd.UserID)
	if err != nil {
		return false, "", err
	}
	if rd.UserID != 0 && role.CanAdmin() {
		return true, "allowed: triggered by an admin or owner of " + slug, nil
	}
	return false, fmt.Sprintf("refused: %s declares no allow_* rule, so only pipelines triggered by an admin or owner of %s may read it",
		file, slug), nil
}

// globList reads an allow_* value: one glob or a list of them.
func globList(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%v is not a string", e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("a %T", v)
	}
}

func matchAny(globs []string, s string) bool {
	for _, p := range globs {
		g, err := spec.CompileGlob(p)
		if err == nil && g.Match(s) {
			return true
		}
	}
	return false
}
