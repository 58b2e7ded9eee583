package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/nimbus-build/nimbus/internal/envfile"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Importer is the part of the server's API that reads files of its repositories for imports.
// The agent's client implements it; a runner whose API does not fails jobs with imports.
type Importer interface {
	Import(ctx context.Context, leaseID string, req protocol.ImportRequest) (protocol.ImportFile, error)
}

// importEnv loads a job's env files (`imports:` of the pipeline, its stage and the job, in that
// order; later files win) when it starts. A path may use variables, including those that earlier
// files defined. A URL is read through the server, which checks who may read it and audits
// secret repositories (backend/repo/imports.go); any other path is a file of the checkout. The
// values of a secret repository's files are masked in every log of the run from then on.
func (x *run) importEnv(ctx context.Context, job protocol.Job, image string, env map[string]string, jl *jobLog) (map[string]string, error) {
	imported := map[string]string{}
	for _, ref := range job.Imports {
		// Substitution sees the job's env so far and what earlier files defined.
		vars := maps.Clone(env)
		maps.Copy(vars, imported)
		// The plan lists the names it could not know (RuntimeVars); earlier files' names are
		// known only here.
		names := append(slices.Clip(job.RuntimeVars), slices.Collect(maps.Keys(imported))...)
		p := strings.TrimSpace(protocol.ExpandVars(ref, names, vars))
		if p == "" {
			return nil, fmt.Errorf("imports: %q is empty once its variables are substituted", ref)
		}
		name, content, secret, err := x.readImport(ctx, job, protocol.ImportEnv, image, p)
		if err != nil {
			return nil, err
		}
		vals, err := envfile.Parse(name, content)
		if err != nil {
			return nil, fmt.Errorf("imports: %s: %w", p, err)
		}
		if secret {
			x.addSecrets(slices.Collect(maps.Values(vals)), jl)
		}
		maps.Copy(imported, vals)
		jl.note("imports: %s: %d variables%s", p, len(vals), map[bool]string{true: " (masked: a secret repository)"}[secret])
	}
	return imported, nil
}

// fromFiles merges a job's settingsFrom (a plugin) or optionsFrom (a built-in task) files into
// its settings or options when it starts. Files are read as imports are (a URL through the
// server with the same rules and audit, any other path from the checkout, where an earlier job
// may have written it), parsed as structured values (envfile.Object), and merged at the top
// level: a later file wins over an earlier one and the job's own settings or options win over
// every file, as CNB says. Values of a secret repository's files are masked from then on.
func (x *run) fromFiles(ctx context.Context, job protocol.Job, image string, env map[string]string, jl *jobLog) (protocol.Job, error) {
	kind, refs, own := protocol.ImportSettingsFrom, job.SettingsFrom, job.Settings
	if job.Kind == protocol.KindBuiltin {
		kind, refs, own = protocol.ImportOptionsFrom, job.OptionsFrom, job.Options
	}
	if len(refs) == 0 {
		return job, nil
	}
	merged := map[string]any{}
	for _, ref := range refs {
		p := strings.TrimSpace(protocol.ExpandVars(ref, job.RuntimeVars, env))
		if p == "" {
			return job, fmt.Errorf("%s: %q is empty once its variables are substituted", kind, ref)
		}
		name, content, secret, err := x.readImport(ctx, job, kind, image, p)
		if err != nil {
			return job, err
		}
		obj, err := envfile.Object(name, content)
		if err != nil {
			return job, fmt.Errorf("%s: %s: %w", kind, p, err)
		}
		if secret {
			x.addSecrets(leaves(obj, nil), jl)
		}
		maps.Copy(merged, obj)
		jl.note("%s: %s: %d keys%s", kind, p, len(obj), map[bool]string{true: " (masked: a secret repository)"}[secret])
	}
	maps.Copy(merged, own)
	if kind == protocol.ImportOptionsFrom {
		job.Options = merged
	} else {
		job.Settings = merged
	}
	return job, nil
}

// readImport reads one file for an import of the given kind: from the server for a URL, from
// the checkout otherwise.
func (x *run) readImport(ctx context.Context, job protocol.Job, kind, image, p string) (name string, content []byte, secret bool, err error) {
	if strings.Contains(p, "://") {
		imp, ok := x.cfg.API.(Importer)
		if !ok {
			return "", nil, false, fmt.Errorf("%s: %s: this agent cannot read files of the server's repositories", kind, p)
		}
		f, err := imp.Import(ctx, x.lease.ID, protocol.ImportRequest{URL: p, Kind: kind, Image: image, Job: job.Key})
		if err != nil {
			return "", nil, false, fmt.Errorf("%s: %w", kind, err)
		}
		return f.Name, []byte(f.Content), f.Secret, nil
	}
	// A file of the checkout, relative to its root ("/env.yml" too); it may not leave the
	// checkout, by its path (the path rule, in checkoutRel) or by a symlink
	// (readCheckoutFile opens it through an os.Root).
	rel := strings.TrimPrefix(p, "/")
	b, err := x.readCheckoutFile(rel)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, false, fmt.Errorf("%s: %s: no such file in the workspace", kind, p)
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("%s: %s: %w", kind, p, err)
	}
	return path.Base(rel), b, false, nil
}

// addSecrets masks more values in the job's log and in every log opened later.
func (x *run) addSecrets(vals []string, jl *jobLog) {
	x.mu.Lock()
	x.secrets = append(slices.Clip(x.secrets), vals...)
	x.mu.Unlock()
	jl.addSecrets(vals)
}

// secretList is the values masked so far.
func (x *run) secretList() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.secrets
}

// leaves are the scalar values of a settings or options file as text, whatever their keys.
func leaves(v any, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			out = leaves(e, out)
		}
	case []any:
		for _, e := range t {
			out = leaves(e, out)
		}
	case nil:
	case string:
		out = append(out, t)
	default:
		out = append(out, fmt.Sprint(t))
	}
	return out
}
