package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
)

// Engine is the part of the Docker Engine API an image needs; *client.Client implements it.
type Engine interface {
	ServerVersion(ctx context.Context) (types.Version, error)
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	DistributionInspect(ctx context.Context, ref, encodedAuth string) (registry.DistributionInspect, error)
	ImagePull(ctx context.Context, ref string, opts image.PullOptions) (io.ReadCloser, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, opts build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImagePush(ctx context.Context, ref string, opts image.PushOptions) (io.ReadCloser, error)
}

// Builder makes environment images on one Docker engine. It holds no state: concurrent calls
// are fine (two runs that miss the same version both build it; the engine keeps one image).
type Builder struct {
	Engine Engine
	// NetworkMode of the build's RUN steps, the same as the job containers' ("" = the engine's
	// default): a build gets no network a job would not get.
	NetworkMode string
}

// Auth is a registry user and password.
type Auth struct{ User, Password string }

// Request is one image to make.
type Request struct {
	Spec Spec
	// Checkout is the pipeline's checkout on the host, the folder the Spec's paths are
	// relative to (what the pipeline calls its workspace).
	Checkout string
	// Repository is the image's name without its tag: <registry host>/<repo slug>/<name>.
	Repository string
	// Auth logs in to the registry of Repository, for the pull, the push, and the build's FROM
	// images kept there.
	Auth Auth
	// CPUs and MemoryBytes limit the build's RUN steps, as the pipeline's jobs; 0 = no limit.
	CPUs        float64
	MemoryBytes int64
	// Out receives what the engine prints (the build's steps and their output, pull progress).
	Out io.Writer
	// Note receives one line for each decision Ensure takes; nil drops them.
	Note func(format string, args ...any)
}

// How an image came to be on the engine.
const (
	FoundLocally = "local"  // the engine had this version already
	Pulled       = "pulled" // the registry had it
	Built        = "built"  // nobody had it
)

// Image is an environment image on the engine.
type Image struct {
	// Ref is Repository:Version.
	Ref     string
	Version string
	// Inputs are the lines the version hashes (see Version).
	Inputs []string
	// How is FoundLocally, Pulled or Built.
	How string
	// InRegistry says the registry holds Ref already; when false, Push it.
	InRegistry bool
}

// Ensure puts the image of the request on the engine, reusing what exists, in this order: the
// engine's own copy of that version, the registry's, and only then a build (see README.md).
// Nothing is pushed: when the result is not InRegistry, the caller pushes (now or in the
// background). A failed build is an error with the engine's message (the failing step and its
// exit code); its output went to Out.
func (b *Builder) Ensure(ctx context.Context, req Request) (Image, error) {
	note := req.Note
	if note == nil {
		note = func(string, ...any) {}
	}
	out := req.Out
	if out == nil {
		out = io.Discard
	}
	root, err := os.OpenRoot(req.Checkout)
	if err != nil {
		return Image{}, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	v, err := b.Engine.ServerVersion(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("ask the engine for its architecture: %w", err)
	}
	version, inputs, err := Version(root, req.Spec, v.Arch)
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: req.Repository + ":" + version, Version: version, Inputs: inputs}
	auth, err := encodeAuth(req.Repository, req.Auth)
	if err != nil {
		return Image{}, err
	}
	if found, inRegistry, err := b.local(ctx, img.Ref, req.Repository, auth); err != nil {
		return Image{}, err
	} else if found {
		img.How, img.InRegistry = FoundLocally, inRegistry
		note("%s: found on this engine, reused (nothing built)", img.Ref)
		return img, nil
	}
	begin := time.Now()
	err = b.pull(ctx, img.Ref, auth, out)
	switch {
	case err == nil:
		img.How, img.InRegistry = Pulled, true
		note("%s: pulled from the registry in %s, reused (nothing built)", img.Ref, since(begin))
		return img, nil
	case ctx.Err() != nil:
		return Image{}, ctx.Err()
	case client.IsErrNotFound(err):
		note("%s: not on this engine, not in the registry: building it from", img.Ref)
	default:
		note("%s: not on this engine, and the registry did not give it (%s): building it from", img.Ref, firstLine(err))
	}
	for _, l := range inputs[1:] { // the first line is the format's
		note("  %s", l)
	}
	begin = time.Now()
	if err := b.build(ctx, root, req, img.Ref, out); err != nil {
		return Image{}, err
	}
	img.How = Built
	note("%s: built in %s", img.Ref, since(begin))
	return img, nil
}

// local says whether the engine has the image and, if so, whether the registry has it too: the
// engine remembers the digest of a pull from or a push to the registry; otherwise the registry
// is asked.
func (b *Builder) local(ctx context.Context, ref, repository, auth string) (found, inRegistry bool, err error) {
	info, err := b.Engine.ImageInspect(ctx, ref)
	if client.IsErrNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	for _, d := range info.RepoDigests {
		if strings.HasPrefix(d, repository+"@") {
			return true, true, nil
		}
	}
	_, err = b.Engine.DistributionInspect(ctx, ref, auth)
	return true, err == nil, nil
}

// pull fetches the image from the registry; the progress goes to out.
func (b *Builder) pull(ctx context.Context, ref, auth string, out io.Writer) error {
	rc, err := b.Engine.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: auth})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = copyMessages(out, rc)
	return err
}

// build builds the image from the context of the request and tags it ref.
func (b *Builder) build(ctx context.Context, root *os.Root, req Request, ref string, out io.Writer) error {
	pr, pw := io.Pipe()
	defer pr.Close() // unblocks the writer when the engine stops reading early
	go func() { pw.CloseWithError(WriteContext(pw, root, req.Spec)) }()
	df, _ := cleanPath("dockerfile", req.Spec.Dockerfile) // checked by Version already
	args := make(map[string]*string, len(req.Spec.BuildArgs))
	for k, v := range req.Spec.BuildArgs {
		args[k] = &v
	}
	opts := build.ImageBuildOptions{
		Tags: []string{ref}, Dockerfile: df, Target: req.Spec.Target, BuildArgs: args,
		// The classic builder: it needs no session, and every engine has it.
		Version: build.BuilderV1,
		Remove:  true, ForceRemove: true, // no intermediate container stays behind, even after a failure
		NetworkMode: b.NetworkMode, Memory: req.MemoryBytes,
	}
	if req.CPUs > 0 {
		opts.CPUPeriod = 100_000
		opts.CPUQuota = int64(req.CPUs * 100_000)
	}
	if host := registryHost(req.Repository); req.Auth.User != "" && host != "" {
		opts.AuthConfigs = map[string]registry.AuthConfig{host: {Username: req.Auth.User, Password: req.Auth.Password, ServerAddress: host}}
	}
	resp, err := b.Engine.ImageBuild(ctx, pr, opts)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	defer resp.Body.Close()
	if _, err := copyMessages(out, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("build: %w", err)
	}
	return nil
}

// Push pushes the image to its registry and returns the digest the registry gave it. The
// progress goes to out (nil drops it).
func (b *Builder) Push(ctx context.Context, ref string, a Auth, out io.Writer) (string, error) {
	if out == nil {
		out = io.Discard
	}
	auth, err := encodeAuth(ref, a)
	if err != nil {
		return "", err
	}
	rc, err := b.Engine.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	defer rc.Close()
	// A push that fails half-way still answers 200: its error arrives in the stream.
	aux, err := copyMessages(out, rc)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	for _, a := range aux {
		var r struct{ Digest string }
		if json.Unmarshal(a, &r) == nil && r.Digest != "" {
			return r.Digest, nil
		}
	}
	return "", nil
}

// encodeAuth is the X-Registry-Auth header of a ref's registry; "" without a user.
func encodeAuth(ref string, a Auth) (string, error) {
	if a.User == "" {
		return "", nil
	}
	enc, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: a.User, Password: a.Password, ServerAddress: registryHost(ref)})
	if err != nil {
		return "", fmt.Errorf("encode the registry credentials: %w", err)
	}
	return enc, nil
}

// registryHost is the registry part of an image name ("" for Docker Hub's short names).
func registryHost(ref string) string {
	host, _, ok := strings.Cut(ref, "/")
	if !ok || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return ""
	}
	return host
}

// message is one JSON message of the engine's build, pull and push streams.
type message struct {
	Stream         string          `json:"stream"`
	Status         string          `json:"status"`
	ID             string          `json:"id"`
	Progress       string          `json:"progress"`
	ProgressDetail json.RawMessage `json:"progressDetail"`
	Error          string          `json:"error"`
	ErrorDetail    *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Aux json.RawMessage `json:"aux"`
}

// copyMessages reads a stream to its end and writes it to out as plain text: build output as
// it is, pull and push states one line each, without the progress bars. It returns the aux
// messages and the stream's error, if it carries one.
func copyMessages(out io.Writer, r io.Reader) ([]json.RawMessage, error) {
	dec := json.NewDecoder(r)
	var aux []json.RawMessage
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return aux, nil
		} else if err != nil {
			return aux, fmt.Errorf("read the engine's answer: %w", err)
		}
		switch {
		case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
			return aux, errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		case m.Error != "":
			return aux, errors.New(strings.TrimSpace(m.Error))
		case m.Aux != nil:
			aux = append(aux, m.Aux)
		case m.Stream != "":
			io.WriteString(out, m.Stream)
		case m.Status != "" && m.Progress == "" && !hasProgress(m.ProgressDetail):
			if m.ID != "" {
				fmt.Fprintf(out, "%s: %s\n", m.ID, m.Status)
			} else {
				fmt.Fprintln(out, m.Status)
			}
		}
	}
}

func hasProgress(d json.RawMessage) bool {
	s := strings.TrimSpace(string(d))
	return s != "" && s != "{}" && s != "null"
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
