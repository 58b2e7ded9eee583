package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Releases, which the agent makes itself with the pipeline's job token (protocol/releases.go):
//
//   - git:release (options tag, title, description, descriptionFromFile, preRelease, latest,
//     overlying) creates or updates the release of a tag. The tag defaults to the pushed tag on
//     a tag event. Beyond CNB, `attachments` (globs of the checkout) publishes files with it in
//     one task.
//   - A plugin job whose image is cnbcool/attachments (settings tag, attachments) publishes files
//     to an existing release, as CNB's plugin does; no image is pulled for it.
//
// Files are read from the checkout: a relative glob, or an absolute one under the checkout's
// mount path. Each is published under its base name with its sha256, so a retried task sends
// nothing twice and the server refuses a name that already holds other bytes.

const typeGitRelease = "git:release"

// Releaser is the part of the agent's client that publishes releases with a job token.
type Releaser interface {
	PutRelease(ctx context.Context, jobToken, slug, tag string, req protocol.ReleaseRequest) (protocol.Release, error)
	PutReleaseFile(ctx context.Context, jobToken, slug, tag, name string, open func() (*os.File, error)) (protocol.ReleaseFile, error)
}

// attachmentsImage reports whether a plugin image is cnbcool/attachments (any registry host of
// CNB's, any tag), which the agent runs itself.
func attachmentsImage(image string) bool {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	name = strings.TrimPrefix(name, "docker.cnb.cool/")
	return name == "cnbcool/attachments"
}

// gitRelease runs git:release.
func (x *run) gitRelease(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	return x.releaseTask(ctx, job, job.Options, env, jl, true)
}

// attachments runs the cnbcool/attachments plugin from its settings.
func (x *run) attachments(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	return x.releaseTask(ctx, job, job.Settings, env, jl, false)
}

func (x *run) releaseTask(ctx context.Context, job protocol.Job, raw map[string]any, env map[string]string, jl *jobLog, create bool) jobResult {
	what := typeGitRelease
	if !create {
		what = "cnbcool/attachments"
	}
	fail := func(err error) jobResult {
		if ctx.Err() != nil {
			return x.interrupted(ctx)
		}
		jl.note("%s: %v", what, err)
		return x.failure(job, what+": "+err.Error(), nil)
	}
	rl, ok := x.cfg.API.(Releaser)
	if !ok {
		return fail(errors.New("this agent cannot publish releases"))
	}
	opts := runtimeOptions(raw, job.RuntimeVars, env)
	str := func(k string) (string, error) { return optionString(opts[k]) }
	tag, err := str("tag")
	if err != nil {
		return fail(fmt.Errorf("option tag: %w", err))
	}
	if tag = strings.TrimSpace(tag); tag == "" && env["CNB_IS_TAG"] == "true" {
		tag = env["CNB_BRANCH"]
	}
	if tag == "" {
		return fail(errors.New("no tag: set the option tag, or run it on a tag push"))
	}
	slug := env["CNB_REPO_SLUG"]
	files, err := x.releaseFiles(opts["attachments"])
	if err != nil {
		return fail(err)
	}
	// The tag and the files' names are what the release and its files are stored under: one
	// holding a secret is refused, not masked (reports.go).
	secrets := newReportMasker(x.secretList())
	if secrets.holds(tag) {
		return fail(fmt.Errorf("the tag %q holds a secret: a release's tag is shown to everyone who may read the repo", tag))
	}
	for name := range files {
		if secrets.holds(name) {
			return fail(fmt.Errorf("the file name %q holds a secret: a release's file names are shown to everyone who may read the repo", name))
		}
	}
	if create {
		req, err := x.releaseRequest(opts, str, tag)
		if err != nil {
			return fail(err)
		}
		rel, err := rl.PutRelease(ctx, x.lease.JobToken, slug, tag, maskReport(req, x.secretList()))
		if err != nil {
			return fail(err)
		}
		jl.note("%s: release %s (%s) of %s", what, rel.Tag, rel.Title, slug)
	} else if len(files) == 0 {
		return fail(errors.New("the setting attachments names no file"))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		rel := files[name]
		f, err := rl.PutReleaseFile(ctx, x.lease.JobToken, slug, tag, name, func() (*os.File, error) { return x.openCheckoutFile(rel) })
		if err != nil {
			return fail(err)
		}
		jl.note("%s: %s: %d bytes, %s", what, name, f.Size, f.Digest)
	}
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code}
}

// releaseRequest reads git:release's options (CNB's names), the notes from descriptionFromFile
// when description is empty.
func (x *run) releaseRequest(opts map[string]any, str func(string) (string, error), tag string) (protocol.ReleaseRequest, error) {
	var req protocol.ReleaseRequest
	var err error
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		switch k {
		case "title":
			req.Title, err = str(k)
		case "description":
			req.Notes, err = str(k)
		case "preRelease":
			req.PreRelease, err = optionBool(opts[k])
		case "overlying":
			req.Overlying, err = optionBool(opts[k])
		case "latest":
			var b bool
			b, err = optionBool(opts[k])
			req.Latest = &b
		case "tag", "attachments", "descriptionFromFile":
		default:
			// Other CNB options are accepted and have no effect here.
		}
		if err != nil {
			return req, fmt.Errorf("option %s: %w", k, err)
		}
	}
	if from, err := str("descriptionFromFile"); err != nil {
		return req, fmt.Errorf("option descriptionFromFile: %w", err)
	} else if from != "" && strings.TrimSpace(req.Notes) == "" {
		b, err := x.readCheckoutFile(from)
		if err != nil {
			return req, fmt.Errorf("descriptionFromFile: %w", err)
		}
		req.Notes = string(b)
	}
	if req.Title == "" {
		req.Title = tag
	}
	return req, nil
}

// releaseFiles expands the attachments globs into base name → path relative to the checkout.
// Globs match names in the checkout; the files are opened through openCheckoutFile.
func (x *run) releaseFiles(v any) (map[string]string, error) {
	globs, err := optionStrings(v)
	if err != nil {
		return nil, fmt.Errorf("attachments: %w", err)
	}
	out := map[string]string{}
	for _, g := range globs {
		rel, err := x.checkoutRel(g)
		if err != nil {
			return nil, err
		}
		matches, err := filepath.Glob(filepath.Join(x.checkout, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("attachments: %q: %w", g, err)
		}
		n := 0
		for _, m := range matches {
			r, err := filepath.Rel(x.checkout, m)
			if err != nil {
				continue
			}
			if st, err := os.Lstat(m); err != nil || !st.Mode().IsRegular() {
				continue // directories, and symlinks (which could point off the checkout)
			}
			name := filepath.Base(m)
			if prev, ok := out[name]; ok && prev != r {
				return nil, fmt.Errorf("attachments: two files are named %s", name)
			}
			out[name] = filepath.ToSlash(r)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("attachments: %q matches no file in the workspace", g)
		}
	}
	return out, nil
}

// checkoutRel maps a path a job names (relative to the checkout, or absolute under its mount
// path inside containers) to a path relative to the checkout, cleaned and checked by the path
// rule (internal/userpath.Clean), refusing anything outside the checkout.
func (x *run) checkoutRel(p string) (string, error) {
	rel := p
	if path.IsAbs(p) {
		mount := path.Clean(x.mount)
		r, ok := strings.CutPrefix(path.Clean(p), mount+"/")
		if !ok {
			return "", fmt.Errorf("%s is outside the workspace (%s): files are read from the workspace", p, x.mount)
		}
		rel = r
	}
	clean, err := userpath.Clean(rel)
	if err != nil {
		return "", fmt.Errorf("%w: files are read from the workspace", err)
	}
	return clean, nil
}

// openCheckoutFile opens a regular file of the checkout. Jobs write the checkout, so it is
// opened through an os.Root: a symlink a job planted cannot lead the agent to a file of its host.
func (x *run) openCheckoutFile(rel string) (*os.File, error) {
	root, err := os.OpenRoot(x.checkout)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file of the workspace", rel)
	}
	return f, nil
}

// readCheckoutFile reads a file of the checkout as openCheckoutFile opens it.
func (x *run) readCheckoutFile(p string) ([]byte, error) {
	rel, err := x.checkoutRel(p)
	if err != nil {
		return nil, err
	}
	f, err := x.openCheckoutFile(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
