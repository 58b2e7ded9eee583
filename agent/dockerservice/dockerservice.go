// Package dockerservice runs the `docker` service of pipelines (`services: [docker]`): a Docker
// engine of the pipeline's own, started before its first job and gone, with everything in it,
// when the pipeline ends, whatever the outcome. Job containers reach it through a socket
// mounted at /var/run/docker.sock (DOCKER_HOST is set), find a docker CLI on PATH even in
// images that have none, and are logged in to Nimbus's registry with the pipeline's job token.
//
// The job containers themselves still run on the agent's engine; only what a job does with
// `docker` runs on the pipeline's engine. The agent's own engine socket is never handed to a
// job.
//
// Modes (the agent's --docker-service flag):
//
//   - rootless (the default): dockerd under rootlesskit as an unprivileged host user with
//     subordinate id ranges. Root in its containers, `--privileged` included, is that user on
//     the host: it cannot read or write what the user cannot, load kernel modules, or see
//     other pipelines' engines. Its containers get network "none" (or slirp4netns NAT, when
//     the host allows it); the engine itself pulls and pushes with the host's network.
//   - privileged: a root dockerd in its own mount and pid namespaces. A `--privileged`
//     container in it is root on the host. For trusted tenants only; the operator opts in.
//   - off: pipelines that ask for the service fail at start, saying so.
//
// One engine, per pipeline:
//
//	<run dir>/<name>/  (XDG_RUNTIME_DIR, the user's, 0700)  docker.sock (0666), exec root,
//	                                                 rootlesskit state; <name> is a short hash
//	                                                 of the lease id (socket paths are short)
//	<dir>/<name>/        root 0711
//	    lease                                        the lease id
//	    data/  (the user's, 0700)                    the engine's data root: images, containers
//	    home/  (the user's)                          HOME
//	    ws/                                          the checkout, idmapped (see idmappedMount)
//	    config/                                      DOCKER_CONFIG of the jobs: config.json with
//	                                                 the registry login
//	cgroup nimbus-services/<name>                    the pipeline's cores and memory, for the
//	                                                 engine and everything it starts
//
// Checkout paths mean the same inside the engine: it sees the pipeline's checkout at the
// same path the jobs do (a bind mount in the engine's own mount namespace), so
// `docker run -v $(pwd)/out:/out` works. For a rootless engine that bind goes through an
// idmapped mount, so files the jobs wrote as root are its root's and what its containers write
// is root's for the next job.
//
// Disk: the engine's data root is measured every DiskCheckInterval; above DiskLimit the
// pipeline fails with a message naming the limit.
//
// An engine dies with the agent, however the agent dies (startAndWait); what it leaves on disk
// the agent's next start removes (Cleanup).
//
// This package needs root (the agent runs as root where it offers the service): it switches to
// the engine's user, makes idmapped mounts and cgroups.
package dockerservice

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

// Modes of the service.
const (
	ModeRootless   = "rootless"
	ModePrivileged = "privileged"
	ModeOff        = "off"
)

// Networks of a rootless engine.
const (
	NetworkHost        = "host"
	NetworkSlirp4netns = "slirp4netns"
)

// Where the service appears inside job containers.
const (
	SocketPath = "/var/run/docker.sock"
	CLIDir     = "/.nimbus/bin"
	ConfigDir  = "/.nimbus/docker"
)

// Defaults.
const (
	DefaultUser              = "nimbus-dind"
	DefaultStartTimeout      = 60 * time.Second
	DefaultDiskCheckInterval = 10 * time.Second
	DefaultRunDir            = "/run/nimbus-services"
)

// ErrUnavailable means this agent cannot offer the docker service; the message says why.
var ErrUnavailable = errors.New("the docker service is not available on this agent")

// Config is the agent's setting of the service.
type Config struct {
	// Mode is rootless, privileged or off.
	Mode string
	// User runs rootless engines; it needs ranges in /etc/subuid and /etc/subgid.
	User string
	// Network of rootless engines: host (the engine shares the host's network; its containers
	// get none) or slirp4netns (a user-mode NAT for the engine and its containers).
	Network string
	// Dockerd, Rootlesskit and CLI are executables; "" = found on PATH. CLI is the docker
	// client mounted into job containers; it must be statically linked to run in any image.
	Dockerd, Rootlesskit, CLI string
	// Dir holds the engines' state (<agent work dir>/services); RunDir their sockets ("" =
	// DefaultRunDir: short, because a unix socket's path is at most 108 bytes).
	Dir, RunDir string
	// DiskLimit bounds one engine's data root in bytes; 0 = no limit.
	DiskLimit         int64
	DiskCheckInterval time.Duration
	StartTimeout      time.Duration
	Log               *slog.Logger
	// SubUID and SubGID are the subordinate id files; "" = /etc/subuid and /etc/subgid.
	SubUID, SubGID string
}

// Manager starts and stops the engines of one agent.
type Manager struct {
	cfg         Config
	id          *identity // rootless only
	dockerd     string
	rootlesskit string
	cli         string
	cliProblem  string // why no CLI is mounted, when none is
	unavailable error
}

// New checks what the mode needs. A host that cannot offer the service still gets a Manager:
// Available says why, and pipelines that ask for the service fail with that.
func New(cfg Config) *Manager {
	if cfg.Mode == "" {
		cfg.Mode = ModeRootless
	}
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if cfg.Network == "" {
		cfg.Network = NetworkHost
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.DiskCheckInterval <= 0 {
		cfg.DiskCheckInterval = DefaultDiskCheckInterval
	}
	if cfg.RunDir == "" {
		cfg.RunDir = DefaultRunDir
	}
	if cfg.SubUID == "" {
		cfg.SubUID = "/etc/subuid"
	}
	if cfg.SubGID == "" {
		cfg.SubGID = "/etc/subgid"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg}
	m.unavailable = m.check()
	m.cli, m.cliProblem = findCLI(cfg.CLI)
	return m
}

func (m *Manager) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
	}
	switch m.cfg.Mode {
	case ModeOff:
		return fail("the agent runs with --docker-service=off")
	case ModeRootless, ModePrivileged:
	default:
		return fail("unknown mode %q (want rootless, privileged or off)", m.cfg.Mode)
	}
	if m.cfg.Network != NetworkHost && m.cfg.Network != NetworkSlirp4netns {
		return fail("unknown network %q (want host or slirp4netns)", m.cfg.Network)
	}
	if m.cfg.Dir == "" {
		return fail("no state directory")
	}
	if os.Geteuid() != 0 {
		return fail("the agent does not run as root, which starting per-pipeline engines needs")
	}
	var err error
	if m.dockerd, err = lookPath(m.cfg.Dockerd, "dockerd"); err != nil {
		return fail("dockerd is not installed (Debian: docker.io): %v", err)
	}
	if m.cfg.Mode == ModePrivileged {
		if _, err := exec.LookPath("unshare"); err != nil {
			return fail("unshare (util-linux) is not installed")
		}
		return nil
	}
	if m.rootlesskit, err = lookPath(m.cfg.Rootlesskit, "rootlesskit"); err != nil {
		return fail("rootlesskit is not installed (Debian: rootlesskit): %v", err)
	}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		return fail("newuidmap is not installed (Debian: uidmap)")
	}
	if m.id, err = lookupIdentity(m.cfg.User, m.cfg.SubUID, m.cfg.SubGID); err != nil {
		return fail("rootless engines run as the user %q: %v", m.cfg.User, err)
	}
	if dir := untraversable(m.cfg.Dir); dir != "" {
		return fail("the user %q cannot reach %s: %s is not searchable by others (chmod o+x it, or give the agent another work dir)", m.cfg.User, m.cfg.Dir, dir)
	}
	return nil
}

// untraversable is the first existing ancestor of dir that others may not search, or "".
// Rootless engines run as their own user and keep their state below dir.
func untraversable(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return p
		}
		if p == "/" {
			return ""
		}
	}
}

// Available is nil when pipelines can get an engine, else why not (matching ErrUnavailable).
func (m *Manager) Available() error { return m.unavailable }

// Mode is the configured mode.
func (m *Manager) Mode() string { return m.cfg.Mode }

// CLIProblem says why job containers get no docker CLI from the agent ("" when they do).
func (m *Manager) CLIProblem() string { return m.cliProblem }

// Spec is what one pipeline's engine needs.
type Spec struct {
	// ID names the engine: the lease id (one path element).
	ID string
	// Checkout is the pipeline's checkout on the host (what the pipeline calls its workspace);
	// Mount is where jobs see it.
	Checkout, Mount string
	// CPUs (cores, may be fractional) and MemoryBytes bound the engine and all it starts; 0 = none.
	CPUs        float64
	MemoryBytes int64
	// GPUs are the indexes of the GPUs reserved for the pipeline: the engine sees no other.
	GPUs []string
	// Registry is Nimbus's registry host (CNB_DOCKER_REGISTRY), logged in as User with Password.
	// Insecure makes the engine talk plain HTTP to it.
	Registry, User, Password string
	Insecure                 bool
}

// Engine is one pipeline's running engine.
type Engine struct {
	m      *Manager
	spec   Spec
	name   string // engineName(spec.ID)
	dir    string // state: <Dir>/<name>
	run    string // runtime (sockets): <RunDir>/<name>
	cmd    *exec.Cmd
	cg     *cgroup
	exited chan struct{}
	failed chan error // one error: the engine died or went over its disk limit
	stop   chan struct{}
	once   sync.Once
	Ready  time.Duration // from Start to the engine answering
}

// Start starts a pipeline's engine and returns once it answers. Its output goes to
// <dir>/dockerd.log; a failure to start quotes the end of it.
func (m *Manager) Start(ctx context.Context, spec Spec) (*Engine, error) {
	if m.unavailable != nil {
		return nil, m.unavailable
	}
	if spec.ID == "" || strings.ContainsAny(spec.ID, "/\x00") || spec.ID == "." || spec.ID == ".." {
		return nil, fmt.Errorf("docker service: bad id %q", spec.ID)
	}
	if !filepath.IsAbs(spec.Mount) || !filepath.IsAbs(spec.Checkout) {
		return nil, fmt.Errorf("docker service: the workspace %q and its mount %q must be absolute", spec.Checkout, spec.Mount)
	}
	began := time.Now()
	name := engineName(spec.ID)
	e := &Engine{m: m, spec: spec, name: name, dir: filepath.Join(m.cfg.Dir, name), run: filepath.Join(m.cfg.RunDir, name),
		exited: make(chan struct{}), failed: make(chan error, 1), stop: make(chan struct{})}
	if err := e.start(ctx); err != nil {
		e.teardown()
		return nil, err
	}
	e.Ready = time.Since(began)
	go e.watch()
	return e, nil
}

func (e *Engine) start(ctx context.Context) error {
	m := e.m
	// A leftover of an earlier attempt at the same lease goes first.
	m.removeOne(e.name)
	uid, gid := 0, 0
	if m.id != nil {
		uid, gid = m.id.uid, m.id.gid
	}
	if err := os.MkdirAll(e.dir, 0o711); err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	if err := os.MkdirAll(m.cfg.RunDir, 0o711); err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "lease"), []byte(e.spec.ID+"\n"), 0o644); err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
		own  bool
	}{{e.run, 0o700, true}, {"data", 0o700, true}, {"home", 0o700, true}, {"ws", 0o755, false}, {"config", 0o755, false}} {
		p := filepath.Join(e.dir, d.name)
		if filepath.IsAbs(d.name) {
			p = d.name
		}
		if err := os.Mkdir(p, d.mode); err != nil {
			return fmt.Errorf("docker service: %w", err)
		}
		if d.own {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("docker service: %w", err)
			}
		}
	}
	if err := e.writeLogin(); err != nil {
		return err
	}
	// The engine binds the checkout at the jobs' path in its own mount namespace; the path
	// must exist on the host for that (an empty directory; nothing is ever written there).
	if err := os.MkdirAll(e.spec.Mount, 0o755); err != nil {
		return fmt.Errorf("docker service: create %s for the workspace mount: %w", e.spec.Mount, err)
	}
	checkout := e.spec.Checkout
	if m.id != nil {
		checkout = filepath.Join(e.dir, "ws")
		if err := idmappedMount(m.id, e.spec.Checkout, checkout); err != nil {
			return fmt.Errorf("docker service: %w", err)
		}
	}
	cg, err := newCgroup(e.name, e.spec.CPUs, e.spec.MemoryBytes, uid)
	if err != nil {
		return fmt.Errorf("docker service: limits: %w", err)
	}
	e.cg = cg
	logf, err := os.Create(filepath.Join(e.dir, "dockerd.log"))
	if err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	defer logf.Close()
	e.cmd, err = e.command(checkout)
	if err != nil {
		return err
	}
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if cg.v2 {
		fd, err := cg.fd()
		if err != nil {
			return fmt.Errorf("docker service: cgroup: %w", err)
		}
		defer syscall.Close(fd)
		e.cmd.SysProcAttr.UseCgroupFD = true
		e.cmd.SysProcAttr.CgroupFD = fd
	} else {
		e.cmd.Env = append(e.cmd.Env, "NIMBUS_CGROUP_PROCS="+strings.Join(cg.procsFiles(), " "))
	}
	if err := e.startAndWait(); err != nil {
		return err
	}
	if err := e.waitReady(ctx); err != nil {
		return err
	}
	sock := filepath.Join(e.run, "docker.sock")
	// Jobs in images with a non-root user must reach it too; only this pipeline's containers
	// see the socket at all.
	if err := os.Chmod(sock, 0o666); err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	return nil
}

// startAndWait starts the engine's first process so that the kernel kills it when the agent
// dies (PR_SET_PDEATHSIG), however the agent dies: a crashed agent's engines used to run on,
// with all their containers, until it was started again. The signal goes down the tree on its
// own: rootlesskit and `unshare --kill-child` give their child the same, and that child is
// dockerd's namespace's first process, whose end kills everything in the namespace.
//
// The kernel sends the signal when the thread that started the process ends, not the process:
// the goroutine that starts it keeps its thread to itself until the engine exits, so that no
// other goroutine can end that thread (one that exits while locked to it does) and kill the
// engine of a live agent. e.exited is closed when the engine has exited.
func (e *Engine) startAndWait() error {
	e.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := e.cmd.Start(); err != nil {
			started <- fmt.Errorf("docker service: start the engine: %w", err)
			return
		}
		started <- nil
		e.cmd.Wait()
		close(e.exited)
	}()
	return <-started
}

// joinCgroup is run by the engine's first process (as the engine's user) before anything
// else: on cgroup v1 it moves itself into the pipeline's cgroup, so nothing it starts can be
// outside. On v2 the process is started in it (CLONE_INTO_CGROUP) and the list is empty.
const joinCgroup = `for f in $NIMBUS_CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; exec "$@"`

// maskGPUs runs in the engine's namespace before dockerd: GPUs the pipeline did not reserve are
// /dev/null in the engine's view, so neither --device nor --privileged reaches them; without
// any, the driver's control devices go too.
const maskGPUs = `for f in /dev/nvidia[0-9]*; do
	[ -e "$f" ] || continue
	case " $NIMBUS_ALLOWED_GPUS " in *" ${f#/dev/nvidia} "*) ;; *) mount --bind /dev/null "$f" ;; esac
done
if [ -z "$NIMBUS_ALLOWED_GPUS" ]; then
	for f in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset; do
		if [ -e "$f" ]; then mount --bind /dev/null "$f"; fi
	done
fi
`

// inNamespace runs in a rootless engine's own mount namespace: the checkout appears at the
// jobs' path, then dockerd replaces the shell. The symlinks rootlesskit's copy-up made for the
// host's /run/docker and the like must go, so the engine can create its own.
const inNamespace = `set -e
rm -f /run/docker /run/containerd /run/xtables.lock /run/docker.pid /run/docker.sock
` + maskGPUs + `mount --bind "$1" "$2"
shift 2
exec "$@"`

// inPrivilegedNamespace is the same for a privileged engine, whose /run is the host's: a
// private tmpfs on /run/docker (plugin sockets, the one path dockerd does not take from its
// flags) keeps it off the host engine's files.
const inPrivilegedNamespace = `set -e
mkdir -p /run/docker
mount -t tmpfs -o mode=0700 tmpfs /run/docker
` + maskGPUs + `mount --bind "$1" "$2"
shift 2
exec "$@"`

// command builds the process tree of the engine: sh (joins the cgroup) → rootlesskit (user,
// mount, pid namespaces) → sh (binds the checkout) → dockerd; or, privileged, sh → unshare
// (mount, pid namespaces) → sh → dockerd. checkout is the host path the engine binds at the
// jobs' path: the checkout itself, or its idmapped mount.
func (e *Engine) command(checkout string) (*exec.Cmd, error) {
	m := e.m
	run := e.run
	dockerd := []string{m.dockerd,
		"--host", "unix://" + filepath.Join(run, "docker.sock"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(run, "exec"),
		"--pidfile", filepath.Join(run, "docker.pid"),
		"--iptables=false", "--ip6tables=false", "--userland-proxy=false",
		"--shutdown-timeout", "1",
		"--log-level", "warn",
	}
	if m.cfg.Mode == ModePrivileged || m.cfg.Network == NetworkHost {
		// Sharing the host's network, the engine can make no bridge of its own.
		dockerd = append(dockerd, "--bridge=none")
	}
	if e.spec.Insecure && e.spec.Registry != "" {
		dockerd = append(dockerd, "--insecure-registry", e.spec.Registry)
	}
	var args []string
	if m.cfg.Mode == ModePrivileged {
		inner := append([]string{"/bin/sh", "-c", inPrivilegedNamespace, "sh", checkout, e.spec.Mount}, dockerd...)
		args = append([]string{"unshare", "--mount", "--propagation", "slave", "--pid", "--fork", "--kill-child", "--mount-proc"}, inner...)
	} else {
		inner := append([]string{"/bin/sh", "-c", inNamespace, "sh", checkout, e.spec.Mount}, dockerd...)
		args = []string{m.rootlesskit, "--state-dir", filepath.Join(run, "rootlesskit"),
			"--net", m.cfg.Network, "--copy-up=/etc", "--copy-up=/run", "--propagation=rslave", "--pidns"}
		if m.cfg.Network == NetworkSlirp4netns {
			args = append(args, "--mtu=65520", "--disable-host-loopback", "--port-driver=builtin")
		} else {
			args = append(args, "--port-driver=none")
		}
		args = append(args, inner...)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", joinCgroup, "sh"}, args...)...)
	cmd.Dir = e.dir
	path := os.Getenv("PATH")
	for _, p := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin"} {
		if !strings.Contains(":"+path+":", ":"+p+":") {
			path += ":" + p
		}
	}
	cmd.Env = []string{"PATH=" + path, "HOME=" + filepath.Join(e.dir, "home"), "XDG_RUNTIME_DIR=" + run,
		"NIMBUS_ALLOWED_GPUS=" + strings.Join(e.spec.GPUs, " ")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if m.id != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(m.id.uid), Gid: uint32(m.id.gid), Groups: []uint32{}}
	}
	return cmd, nil
}

// waitReady waits until the engine answers /_ping, it exits, ctx ends or StartTimeout passes.
func (e *Engine) waitReady(ctx context.Context) error {
	hc := e.httpClient()
	deadline := time.NewTimer(e.m.cfg.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e.verifyMapping()
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker service: %w", ctx.Err())
		case <-e.exited:
			return fmt.Errorf("docker service: the engine exited while starting: %s", e.logTail())
		case <-deadline.C:
			return fmt.Errorf("docker service: the engine did not answer within %s: %s", e.m.cfg.StartTimeout, e.logTail())
		case <-tick.C:
		}
	}
}

// verifyMapping checks that the engine's user namespace maps ids as the checkout's idmapped
// mount does; otherwise files would change owners between the jobs and the engine.
func (e *Engine) verifyMapping() error {
	if e.m.id == nil {
		return nil
	}
	pid, err := os.ReadFile(filepath.Join(e.run, "rootlesskit", "child_pid"))
	if err != nil {
		return fmt.Errorf("docker service: rootlesskit's child: %w", err)
	}
	got, err := os.ReadFile(fmt.Sprintf("/proc/%s/uid_map", strings.TrimSpace(string(pid))))
	if err != nil {
		return fmt.Errorf("docker service: the engine's id map: %w", err)
	}
	if normalizeIDMap(string(got)) != formatIDMap(e.m.id.uidMap) {
		return fmt.Errorf("docker service: the engine maps user ids as %q, not as %s and %s say (%q)",
			normalizeIDMap(string(got)), e.m.cfg.SubUID, e.m.cfg.SubGID, formatIDMap(e.m.id.uidMap))
	}
	return nil
}

func (e *Engine) httpClient() *http.Client {
	sock := filepath.Join(e.run, "docker.sock")
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

// logTail is the end of the engine's output, for error messages.
func (e *Engine) logTail() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
	b = bytes.TrimSpace(b)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}

// writeLogin writes the jobs' docker client config: logged in to Nimbus's registry.
func (e *Engine) writeLogin() error {
	cfg := map[string]any{}
	if e.spec.Registry != "" && e.spec.Password != "" {
		user := e.spec.User
		if user == "" {
			user = "cnb"
		}
		cfg["auths"] = map[string]any{e.spec.Registry: map[string]string{
			"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + e.spec.Password))}}
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(e.dir, "config", "config.json"), b, 0o644); err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	return nil
}

// Mounts are what every job container of the pipeline gets.
func (e *Engine) Mounts() []executor.Mount {
	out := []executor.Mount{
		{Source: filepath.Join(e.run, "docker.sock"), Target: SocketPath},
		{Source: filepath.Join(e.dir, "config"), Target: ConfigDir},
	}
	if e.m.cli != "" {
		out = append(out, executor.Mount{Source: e.m.cli, Target: CLIDir + "/docker", ReadOnly: true})
	}
	return out
}

// Env is what every job container of the pipeline gets (its own env wins).
func (e *Engine) Env() map[string]string {
	return map[string]string{"DOCKER_HOST": "unix://" + SocketPath, "DOCKER_CONFIG": ConfigDir}
}

// PathAppend goes at the end of the image's PATH: the image's own docker CLI wins.
func (e *Engine) PathAppend() []string {
	if e.m.cli == "" {
		return nil
	}
	return []string{CLIDir}
}

// Failed delivers one error when the engine dies or uses more disk than allowed.
func (e *Engine) Failed() <-chan error { return e.failed }

// Socket is the engine's socket on the host.
func (e *Engine) Socket() string { return filepath.Join(e.run, "docker.sock") }

func (e *Engine) watch() {
	t := time.NewTicker(e.m.cfg.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-e.exited:
			e.fail(fmt.Errorf("the pipeline's docker service stopped unexpectedly: %s", e.logTail()))
			return
		case <-t.C:
			if e.m.cfg.DiskLimit <= 0 {
				continue
			}
			used := diskUsage(filepath.Join(e.dir, "data"))
			if used > e.m.cfg.DiskLimit {
				e.fail(fmt.Errorf("the pipeline's docker service uses %s of disk, above this agent's limit of %s per pipeline (images, containers and build cache count; the agent's --docker-service-disk sets it)",
					envflag.HumanSize(used), envflag.HumanSize(e.m.cfg.DiskLimit)))
				return
			}
		}
	}
}

func (e *Engine) fail(err error) {
	select {
	case e.failed <- err:
	default:
	}
}

// Stop kills the engine and everything it started, and removes all of it: containers, images,
// mounts, the cgroup, the state directory. It is safe to call more than once.
func (e *Engine) Stop() error {
	var err error
	e.once.Do(func() {
		close(e.stop)
		err = e.teardown()
	})
	return err
}

func (e *Engine) teardown() error {
	var errs []error
	if e.cg != nil {
		if !e.cg.kill() {
			errs = append(errs, errors.New("docker service: processes of the engine survived SIGKILL"))
		}
	}
	if e.cmd != nil && e.cmd.Process != nil {
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.exited
	}
	if err := e.m.removeOne(e.name); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeOne removes what an engine left: processes in its cgroup, the checkout mount, the
// cgroup, the state and runtime directories.
func (m *Manager) removeOne(name string) error {
	var errs []error
	if cg := existingCgroup(name); cg != nil {
		cg.kill()
		if err := cg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	dir := filepath.Join(m.cfg.Dir, name)
	idmapped := filepath.Join(dir, "ws") // the checkout's idmapped mount
	if err := unix.Unmount(idmapped, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("docker service: unmount %s: %w", idmapped, err))
	}
	for _, d := range []string{dir, filepath.Join(m.cfg.RunDir, name)} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("docker service: remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// engineName is the short name of a lease's engine: its directories and cgroup. Unix socket
// paths are limited to 108 bytes, and containerd's lies four levels below the runtime dir.
func engineName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// Cleanup removes what engines of a crashed agent left behind. Call it before any pipeline
// runs.
func (m *Manager) Cleanup() error {
	if m.cfg.Dir == "" {
		return nil
	}
	entries, err := os.ReadDir(m.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker service: %w", err)
	}
	var errs []error
	for _, ent := range entries {
		if ent.IsDir() {
			if err := m.removeOne(ent.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// diskUsage is the space the files under dir take (hard links once).
func diskUsage(dir string) int64 {
	var total int64
	seen := map[uint64]bool{}
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // files come and go while the engine runs
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}

func lookPath(configured, name string) (string, error) {
	if configured != "" {
		name = configured
	}
	return exec.LookPath(name)
}

// findCLI finds the docker client to mount into job containers: configured, else docker on
// PATH, else the usual places. It must be statically linked: a job image may have no libc, or
// another one.
func findCLI(configured string) (string, string) {
	candidates := []string{configured}
	if configured == "" {
		p, _ := exec.LookPath("docker")
		candidates = []string{p, "/usr/local/bin/docker", "/usr/bin/docker"}
	}
	var problems []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		static, err := executor.IsStatic(abs)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		if !static {
			problems = append(problems, c+" is dynamically linked")
			continue
		}
		return abs, ""
	}
	if len(problems) == 0 {
		return "", "no docker CLI on this agent host"
	}
	return "", "no statically linked docker CLI on this agent host (" + strings.Join(problems, "; ") + ")"
}
