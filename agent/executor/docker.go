package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	dmount "github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/nimbus-build/nimbus/internal/lifeline"
)

// Docker runs each step in its own container.
type Docker struct {
	cli     *client.Client
	agentID string
	// hostCPUs is the engine's core count: the engine refuses a CPU limit above it.
	hostCPUs float64
	// SimulateGPUs skips the engine's device request for GPUs (they are pretend ones, see the
	// agent's --gpus simulate:N); NVIDIA_VISIBLE_DEVICES still names them.
	SimulateGPUs bool
	// NetworkMode for step containers ("none", "host", "bridge", …); "" = the engine's default.
	NetworkMode string
	// Lifelines, when set, end every container within a second of the agent's death
	// (internal/lifeline): its main process runs under the init, which watches a lifeline the
	// agent holds. Without them a crashed agent's containers run until it is started again.
	Lifelines *lifeline.Lines
}

// Where a container sees its lifeline and the init that watches it.
const (
	InitPath     = "/.nimbus/init"
	LifelinePath = "/.nimbus/lifeline"
)

// NewDocker connects to the engine at host ("" = DOCKER_HOST or the default socket) and checks
// that it answers.
func NewDocker(ctx context.Context, host, agentID string) (*Docker, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	d := &Docker{cli: cli, agentID: agentID}
	if info, err := cli.Info(ctx); err == nil {
		d.hostCPUs = float64(info.NCPU)
	}
	return d, nil
}

// Name implements Executor.
func (d *Docker) Name() string { return ModeDocker }

// Close implements Executor.
func (d *Docker) Close() error { return d.cli.Close() }

// Run implements Executor.
func (d *Docker) Run(ctx context.Context, s Step) (int, error) {
	line, err := d.hold(s)
	if err != nil {
		return -1, err
	}
	// Deferred first, so released last: after the container is gone.
	defer line.Release()
	cfg, host, err := d.containerConfig(ctx, s, stepCommand(s), line)
	if err != nil {
		return -1, err
	}
	id, err := d.createContainer(ctx, s, cfg, host)
	if err != nil {
		return -1, err
	}
	// Removal must happen even when ctx is already cancelled, hence its own context.
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true})
	}()
	if s.ImageSeen != nil {
		if digest, err := d.imageDigest(ctx, id, s.Image); err == nil {
			s.ImageSeen(s.Image, digest)
		}
	}

	att, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return -1, fmt.Errorf("executor: attach to %q: %w", s.Name, err)
	}
	defer att.Close()
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	errOut := s.Stderr
	if errOut == nil {
		errOut = out
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, errOut, att.Reader)
		copied <- err
	}()

	// Wait is registered before Start so a step that exits at once is not missed.
	waitc, errc := d.cli.ContainerWait(context.WithoutCancel(ctx), id, container.WaitConditionNextExit)
	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return -1, fmt.Errorf("executor: start %q: %w", s.Name, err)
	}
	select {
	case res := <-waitc:
		<-copied // the output is complete once the attach stream ends
		if res.Error != nil {
			return -1, fmt.Errorf("executor: wait for %q: %s", s.Name, res.Error.Message)
		}
		return int(res.StatusCode), nil
	case err := <-errc:
		return -1, fmt.Errorf("executor: wait for %q: %w", s.Name, err)
	case <-ctx.Done():
		// A forced remove kills and removes in one call: a cancelled job's container is gone
		// as soon as the engine can manage (the deferred remove then finds nothing).
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.cli.ContainerRemove(kctx, id, container.RemoveOptions{Force: true}); err != nil && !isGone(err) {
			return -1, errors.Join(ctx.Err(), fmt.Errorf("executor: kill %q: %w", s.Name, err))
		}
		return -1, ctx.Err()
	}
}

// hold holds a lifeline for a step's container; nil (a Line that releases nothing) without
// Lifelines.
func (d *Docker) hold(s Step) (*lifeline.Line, error) {
	if d.Lifelines == nil {
		return nil, nil
	}
	l, err := d.Lifelines.Hold()
	if err != nil {
		return nil, fmt.Errorf("executor: %q: %w", s.Name, err)
	}
	return l, nil
}

// command is a container's main process as the engine takes it: an entrypoint (nil: the
// image's) and its arguments (none: the image's command, when the entrypoint is the image's).
type command struct {
	entrypoint, args []string
}

// stepCommand is a step's main process: `sh -c Script`, or the image's entrypoint with Args.
func stepCommand(s Step) command {
	if s.Script != "" {
		return command{entrypoint: []string{"sh", "-c"}, args: []string{s.Script}}
	}
	return command{args: s.Args}
}

// containerConfig builds the container of a step, for Run and StartContainer: image, env,
// checkout and extra mounts, PATH additions, limits, GPUs, labels, and cmd as its main process,
// under the init that watches line when there is one.
func (d *Docker) containerConfig(ctx context.Context, s Step, cmd command, line *lifeline.Line) (*container.Config, *container.HostConfig, error) {
	if s.Image == "" {
		return nil, nil, fmt.Errorf("executor: step %q has no image", s.Name)
	}
	mount := s.CheckoutMount
	if mount == "" {
		mount = "/workspace"
	}
	cfg := &container.Config{
		Image:      s.Image,
		Env:        envList(s.Env, s.GPUs),
		WorkingDir: mount,
		Labels:     map[string]string{LabelAgent: d.agentID},
		// No TTY: stdout and stderr arrive multiplexed and are demuxed by the reader.
		AttachStdout: true,
		AttachStderr: true,
	}
	for k, v := range s.Labels {
		cfg.Labels[k] = v
	}
	cfg.Entrypoint, cfg.Cmd = cmd.entrypoint, cmd.args
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(d.NetworkMode),
		Init:        boolPtr(true), // reap zombies (exec'd shells leave them) and forward signals
	}
	if s.NetworkOf != "" {
		host.NetworkMode = container.NetworkMode("container:" + s.NetworkOf)
	}
	if s.Checkout != "" {
		host.Binds = []string{s.Checkout + ":" + mount}
	}
	for _, m := range s.Mounts {
		mt := dmount.TypeBind
		if m.Kind == MountVolume {
			mt = dmount.TypeVolume
		}
		host.Mounts = append(host.Mounts, dmount.Mount{Type: mt, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	pathAppend := s.PathAppend
	for _, tool := range s.Tools {
		host.Mounts = append(host.Mounts, dmount.Mount{Type: dmount.TypeBind, Source: tool, Target: ToolDir + "/" + filepath.Base(tool), ReadOnly: true})
		if !slices.Contains(pathAppend, ToolDir) {
			pathAppend = append(slices.Clip(pathAppend), ToolDir)
		}
	}
	// The image's own settings are asked for only when needed: PATH to add to, or the command
	// to put under the init when the image's is what runs.
	var img *imageSettings
	if len(pathAppend) > 0 || (line != nil && cmd.entrypoint == nil) {
		var err error
		if img, err = d.imageSettings(ctx, s.Image, s.ImageAuth); err != nil {
			return nil, nil, fmt.Errorf("executor: %q: %w", s.Name, err)
		}
	}
	if len(pathAppend) > 0 {
		p := img.path
		if v, ok := s.Env["PATH"]; ok {
			p = v // the job's own PATH wins over the image's
		}
		cfg.Env = setEnv(cfg.Env, "PATH", joinPath(p, pathAppend))
	}
	if line != nil {
		argv := img.argv(cmd)
		if len(argv) == 0 {
			return nil, nil, fmt.Errorf("executor: %q: the image %s names no command to run", s.Name, s.Image)
		}
		// The init runs the command the engine would have run, and docker-init stays PID 1.
		cfg.Entrypoint = lifeline.Command(InitPath, LifelinePath, nil)
		cfg.Cmd = argv
		host.Mounts = append(host.Mounts,
			dmount.Mount{Type: dmount.TypeBind, Source: d.Lifelines.Init(), Target: InitPath, ReadOnly: true},
			dmount.Mount{Type: dmount.TypeBind, Source: line.Path(), Target: LifelinePath, ReadOnly: true})
	}
	if s.CPUs > 0 {
		// Capped at the engine's cores, as in Run: the engine refuses more.
		cpus := s.CPUs
		if d.hostCPUs > 0 && cpus > d.hostCPUs {
			cpus = d.hostCPUs
		}
		host.NanoCPUs = int64(cpus * 1e9)
	}
	if s.MemoryBytes > 0 {
		host.Memory = s.MemoryBytes
	}
	if len(s.GPUs) > 0 && !d.SimulateGPUs {
		host.DeviceRequests = []container.DeviceRequest{{
			Driver: "nvidia", DeviceIDs: s.GPUs, Capabilities: [][]string{{"gpu"}},
		}}
	}
	return cfg, host, nil
}

// createContainer creates the container, pulling its image once when the engine lacks it.
func (d *Docker) createContainer(ctx context.Context, s Step, cfg *container.Config, host *container.HostConfig) (string, error) {
	created, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if client.IsErrNotFound(err) {
		if perr := d.pull(ctx, s.Image, s.ImageAuth); perr != nil {
			return "", fmt.Errorf("executor: create container for %q: %w", s.Name, errors.Join(err, perr))
		}
		created, err = d.cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	}
	if err != nil {
		return "", fmt.Errorf("executor: create container for %q: %w", s.Name, err)
	}
	return created.ID, nil
}

// imageDigest is the digest of the image container id was created from: the registry's
// manifest digest (repo@sha256:…) when the engine has one, the one of ref's repository first,
// else the image's own id (an image built or imported on this host has no registry digest).
// Asked of the container, not of ref: the tag may have moved since.
func (d *Docker) imageDigest(ctx context.Context, id, ref string) (string, error) {
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return "", err
	}
	img, err := d.cli.ImageInspect(ctx, c.Image)
	if err != nil {
		return c.Image, nil
	}
	repo := ref
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for _, rd := range img.RepoDigests {
		if strings.HasPrefix(rd, repo+"@") {
			return rd, nil
		}
	}
	if len(img.RepoDigests) > 0 {
		return img.RepoDigests[0], nil
	}
	return img.ID, nil
}

// imageSettings are what of an image's configuration a step's container takes.
type imageSettings struct {
	path             string // PATH its containers start with
	entrypoint, args []string
}

// argv is the command line the engine runs for cmd in the image's containers: the entrypoint
// given or the image's, followed by the arguments given or, when neither was given, the
// image's command.
func (img *imageSettings) argv(cmd command) []string {
	if cmd.entrypoint != nil {
		return slices.Concat(cmd.entrypoint, cmd.args)
	}
	if len(cmd.args) > 0 {
		return slices.Concat(img.entrypoint, cmd.args)
	}
	return slices.Concat(img.entrypoint, img.args)
}

// imageSettings inspects an image, pulling it when it is missing.
func (d *Docker) imageSettings(ctx context.Context, ref string, auth *ImageAuth) (*imageSettings, error) {
	info, err := d.cli.ImageInspect(ctx, ref)
	if client.IsErrNotFound(err) {
		if perr := d.pull(ctx, ref, auth); perr != nil {
			return nil, perr
		}
		info, err = d.cli.ImageInspect(ctx, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	// The engine's default for images that set none.
	img := &imageSettings{path: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if info.Config != nil {
		for _, kv := range info.Config.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				img.path = v
				break
			}
		}
		img.entrypoint, img.args = info.Config.Entrypoint, info.Config.Cmd
	}
	return img, nil
}

func joinPath(path string, extra []string) string {
	parts := []string{}
	if path != "" {
		parts = append(parts, path)
	}
	return strings.Join(append(parts, extra...), ":")
}

// setEnv replaces or adds KEY=value in a Docker env list.
func setEnv(env []string, key, value string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// CreateVolume creates a named volume labelled with the agent's id (so Cleanup finds what a
// crashed run left) and labels. A volume that exists already is kept.
func (d *Docker) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	l := map[string]string{LabelAgent: d.agentID}
	maps.Copy(l, labels)
	if _, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: l}); err != nil {
		return fmt.Errorf("executor: create volume %s: %w", name, err)
	}
	return nil
}

// RemoveVolume removes a named volume and its data; one that is gone already is no error.
func (d *Docker) RemoveVolume(ctx context.Context, name string) error {
	if err := d.cli.VolumeRemove(ctx, name, true); err != nil && !isGone(err) {
		return fmt.Errorf("executor: remove volume %s: %w", name, err)
	}
	return nil
}

// Client is the engine client, for the agent's own work on the same engine (building
// environment images).
func (d *Docker) Client() *client.Client { return d.cli }

// pull fetches an image, with registry credentials when given. The progress stream must be read
// to the end: the pull is finished only when it closes.
func (d *Docker) pull(ctx context.Context, ref string, auth *ImageAuth) error {
	var opts image.PullOptions
	if auth != nil && auth.User != "" {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: auth.User, Password: auth.Password})
		if err != nil {
			return fmt.Errorf("executor: encode registry credentials: %w", err)
		}
		opts.RegistryAuth = enc
	}
	rc, err := d.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return fmt.Errorf("executor: pull %s: %w", ref, err)
	}
	defer rc.Close()
	// Errors in the middle of a pull arrive as JSON messages in the stream.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("executor: pull %s: %w", ref, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("executor: pull %s: %s", ref, msg.Error)
		}
	}
}

// Cleanup implements Executor: it removes every container and volume labelled with this agent's
// id.
func (d *Docker) Cleanup(ctx context.Context) error {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelAgent+"="+d.agentID)),
	})
	if err != nil {
		return fmt.Errorf("executor: list leftover containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		if err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	vols, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelAgent+"="+d.agentID))})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("executor: list leftover volumes: %w", err))...)
	}
	for _, v := range vols.Volumes {
		if err := d.RemoveVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func isGone(err error) bool {
	return client.IsErrNotFound(err) // a container that is already gone is what we wanted
}

// envList turns the step env into Docker's KEY=VALUE list, sorted for reproducible containers,
// and pins NVIDIA_VISIBLE_DEVICES to the reserved GPUs so the NVIDIA runtime never exposes more.
func envList(env map[string]string, gpus []string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		if k == "NVIDIA_VISIBLE_DEVICES" {
			continue
		}
		out = append(out, k+"="+env[k])
	}
	if len(gpus) > 0 {
		out = append(out, "NVIDIA_VISIBLE_DEVICES="+strings.Join(gpus, ","))
	} else {
		out = append(out, "NVIDIA_VISIBLE_DEVICES=void")
	}
	return out
}

func boolPtr(b bool) *bool { return &b }
