// Command nimbus-agent runs pipelines on a CPU or GPU host for a Nimbus server.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/executor/kubernetes"

	corev1 "k8s.io/api/core/v1"

	"github.com/nimbus-build/nimbus/agent"
	"github.com/nimbus-build/nimbus/agent/dockerservice"
	"github.com/nimbus-build/nimbus/agent/gpu"
	"github.com/nimbus-build/nimbus/agent/volumes"
	"github.com/nimbus-build/nimbus/internal/envflag"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

var version = "dev"

func main() { envflag.Main("nimbus-agent", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cfg                 agent.Config
		tags, gpus          string
		pullPolicy, classes string
		kube                kubernetes.Config
		logFormat, logLevel string
	)
	s := envflag.New("nimbus-agent", `nimbus-agent runs Nimbus pipelines on this host, each job in its own Docker container.

It registers once with the registration token (the agent token it gets back is kept in the work
dir), then long-polls the server for pipelines while it has free cores, GPUs and slots.

While the server is unreachable (a restart, an upgrade), running jobs go on; their events, logs
and results are kept and sent once it is back.

On SIGTERM or SIGINT the agent takes no new work. Running pipelines may go on for the stop
grace (default 0: none), then they are killed and reported failed with reason agent_stopped.
Killing and reporting take at most the stop timeout; what the server has not taken by then is
given up (it fails those pipelines agent_lost one lease TTL later). So the agent exits within
grace + timeout; a service manager must allow that (the shipped systemd unit allows 30 s for the
defaults).

Usage: nimbus-agent [flags]`)
	s.String(&cfg.ServerURL, "server", "NIMBUS_SERVER_URL", "http://127.0.0.1:8080", "URL of the Nimbus server")
	s.String(&cfg.Token, "token", "NIMBUS_AGENT_TOKEN", "", "registration token from the server (exchanged once for the agent's own token, kept in the work dir)")
	s.String(&cfg.Name, "name", "NIMBUS_AGENT_NAME", "", "name of this agent on the server; empty = the host name")
	s.String(&tags, "tags", "NIMBUS_AGENT_TAGS", "", "comma-separated runner tags this host serves besides the GPU tags added for detected GPUs; empty = cnb:arch:default,cnb:arch:amd64 on a host without GPUs and no CPU tag on a host with GPUs (name CPU tags to let CPU pipelines take GPU hosts)")
	s.Int(&cfg.CPUs, "cpus", "NIMBUS_AGENT_CPUS", runtime.NumCPU(), "cores this agent may hand out to pipelines")
	s.Bool(&cfg.WholeHost, "whole-host", "NIMBUS_AGENT_WHOLE_HOST", false, "take a pipeline that asks for more cores than --cpus when nothing else runs, alone on all of them (a small host that runs every size, as the all-in-one's built-in agent does)")
	s.Int(&cfg.Concurrency, "concurrency", "NIMBUS_AGENT_CONCURRENCY", 0, "most pipelines run at once; 0 = as many as cores")
	s.String(&gpus, "gpus", "NIMBUS_AGENT_GPUS", "auto", "auto (nvidia-smi when it is on PATH), none, or simulate:N[:MODEL] (N pretend GPUs, for testing GPU scheduling and billing on hosts without one); with the kubernetes executor none or cluster:N[:MODEL] (at most N GPU pipelines on the cluster at once, their pods requesting the GPUs)")
	s.String(&cfg.Executor, "executor", "NIMBUS_AGENT_EXECUTOR", "auto", "auto (Docker when an engine answers), docker, shell or kubernetes (each pipeline a pod on a cluster; agent/executor/README.md)")
	s.String(&kube.Kubeconfig, "kubeconfig", "NIMBUS_AGENT_KUBECONFIG", "", "kubernetes executor: kubeconfig file; empty = KUBECONFIG, else the in-cluster service account")
	s.String(&kube.Namespace, "kubernetes-namespace", "NIMBUS_AGENT_KUBERNETES_NAMESPACE", "nimbus-jobs", "kubernetes executor: namespace of the pipeline pods")
	s.Bool(&kube.HostNetwork, "kubernetes-host-network", "NIMBUS_AGENT_KUBERNETES_HOST_NETWORK", false, "kubernetes executor: run pipeline pods in their node's network (for clusters whose pods cannot reach the server otherwise)")
	s.String(&pullPolicy, "kubernetes-pull-policy", "NIMBUS_AGENT_KUBERNETES_PULL_POLICY", "IfNotPresent", "kubernetes executor: pull policy of job images (Always, IfNotPresent or Never)")
	s.String(&classes, "kubernetes-classes", "NIMBUS_AGENT_KUBERNETES_CLASSES", "", "kubernetes executor: JSON file mapping runner tags to where their pods run: {\"cnb:arch:amd64:gpu:L40\": {\"nodeSelector\": {\"nvidia.com/gpu.product\": \"NVIDIA-L40S\"}, \"tolerations\": [...], \"runtimeClassName\": \"nvidia\", \"gpus\": 1}}")
	s.String(&cfg.DockerHost, "docker-host", "NIMBUS_AGENT_DOCKER_HOST", "", "Docker engine address; empty = DOCKER_HOST or the default socket")
	s.String(&cfg.Network, "network", "NIMBUS_AGENT_NETWORK", "", "network mode of job containers (none, host, bridge, …); empty = the engine's default")
	s.String(&cfg.DefaultImage, "default-image", "NIMBUS_AGENT_DEFAULT_IMAGE", agent.DefaultImage, "image of script jobs whose pipeline names none")
	s.String(&cfg.WorkspaceIDEImage, "workspace-ide-image", "NIMBUS_AGENT_WORKSPACE_IDE_IMAGE", "", "IDE container for workspaces whose image has no code-server: an image with code-server on its PATH, run beside the workspace's container sharing its workspace and network; empty = such workspaces offer the web terminal only")
	s.String(&cfg.WorkDir, "work-dir", "NIMBUS_AGENT_WORK_DIR", "./nimbus-agent", "directory for workspaces, the agent id and the agent token")
	s.Duration(&cfg.StopGrace, "stop-grace", "NIMBUS_AGENT_STOP_GRACE", 0, "on SIGTERM, how long running pipelines may go on before they are killed (agent_stopped)")
	s.Duration(&cfg.StopTimeout, "stop-timeout", "NIMBUS_AGENT_STOP_TIMEOUT", agent.DefaultStopTimeout, "on SIGTERM, after the grace: the most time for killing containers and reporting the pipelines' ends")
	s.String(&cfg.DockerService.Mode, "docker-service", "NIMBUS_AGENT_DOCKER_SERVICE", dockerservice.ModeRootless,
		"how pipelines that list services: docker get their own Docker engine: rootless (as the docker service user; root in its containers, privileged ones included, is that user on the host), privileged (a root engine per pipeline, whose privileged containers are root on the host: trusted tenants only) or off")
	s.String(&cfg.DockerService.User, "docker-service-user", "NIMBUS_AGENT_DOCKER_SERVICE_USER", dockerservice.DefaultUser,
		"unprivileged host user that runs rootless docker services; it needs ranges in /etc/subuid and /etc/subgid")
	s.String(&cfg.DockerService.Network, "docker-service-network", "NIMBUS_AGENT_DOCKER_SERVICE_NETWORK", dockerservice.NetworkHost,
		"network of rootless docker services: host (the engine pulls and pushes over the host's network; its containers get none) or slirp4netns (user-mode NAT for the engine and its containers; needs /dev/net/tun)")
	s.String(&cfg.DockerService.Dir, "docker-service-dir", "NIMBUS_AGENT_DOCKER_SERVICE_DIR", "",
		"where docker services keep their images and containers; empty = "+agent.DefaultServiceDir+"/<agent id>")
	s.Size(&cfg.DockerService.DiskLimit, "docker-service-disk", "NIMBUS_AGENT_DOCKER_SERVICE_DISK", 50<<30,
		"most disk one pipeline's docker service may use (images, containers, build cache); above it the pipeline fails; 0 = no limit")
	s.String(&cfg.DockerService.CLI, "docker-cli", "NIMBUS_AGENT_DOCKER_CLI", "",
		"statically linked docker client mounted into the jobs of pipelines with services: docker; empty = docker on PATH or /usr/local/bin/docker")
	s.Size(&cfg.CacheBudget, "cache-budget", "NIMBUS_AGENT_CACHE_BUDGET", volumes.DefaultBudget,
		"most disk the docker.volumes caches take in the work dir (20GiB, 500MB or a byte count); least recently used caches are evicted")
	s.String(&cfg.NimbusCLI, "nimbus-cli", "NIMBUS_AGENT_NIMBUS_CLI", "",
		"statically linked nimbus CLI mounted into every job (nimbus artifact push|pull with the job's token), and the init every job runs under so that it ends if the agent dies; empty = nimbus beside this executable or on PATH; off = none on the jobs' PATH (the one beside this executable or on PATH is still their init)")
	s.String(&logFormat, "log-format", "NIMBUS_LOG_FORMAT", "json", "log format: json or text")
	s.String(&logLevel, "log-level", "NIMBUS_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := s.Parse(args, getenv, stdout); err != nil {
		return err
	}
	if len(s.Args()) > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", s.Args())
	}
	for _, t := range strings.Split(tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Tags = append(cfg.Tags, t)
		}
	}
	if cfg.CPUs < 1 {
		return fmt.Errorf("invalid NIMBUS_AGENT_CPUS %d: at least 1", cfg.CPUs)
	}
	if cfg.StopGrace < 0 || cfg.StopTimeout <= 0 {
		return fmt.Errorf("invalid stop settings (grace %s, timeout %s): the grace is 0 or more, the timeout more than 0", cfg.StopGrace, cfg.StopTimeout)
	}
	if cfg.Concurrency < 0 {
		return fmt.Errorf("invalid NIMBUS_AGENT_CONCURRENCY %d: 0 or more", cfg.Concurrency)
	}
	switch p := corev1.PullPolicy(pullPolicy); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		kube.PullPolicy = p
	default:
		return fmt.Errorf("invalid NIMBUS_AGENT_KUBERNETES_PULL_POLICY %q: Always, IfNotPresent or Never", pullPolicy)
	}
	if classes != "" {
		b, err := os.ReadFile(classes)
		if err != nil {
			return fmt.Errorf("NIMBUS_AGENT_KUBERNETES_CLASSES: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&kube.Classes); err != nil {
			return fmt.Errorf("NIMBUS_AGENT_KUBERNETES_CLASSES %s: %w", classes, err)
		}
	}
	switch {
	case cfg.Executor == executor.ModeKubernetes && (gpus == "auto" || gpus == "none"):
		// The agent's own host has none that matter: the cluster's nodes run the pipelines.
		cfg.DetectGPUs = func(context.Context) ([]protocol.GPU, error) { return nil, nil }
		gpus = ""
	case cfg.Executor == executor.ModeKubernetes:
		slots, err := gpu.Cluster(gpus)
		if err != nil {
			return fmt.Errorf("invalid NIMBUS_AGENT_GPUS %q for the kubernetes executor: none or cluster:N[:MODEL] (%v)", gpus, err)
		}
		cfg.DetectGPUs = func(context.Context) ([]protocol.GPU, error) { return slots, nil }
		gpus = ""
	case strings.HasPrefix(gpus, "cluster:"):
		return fmt.Errorf("invalid NIMBUS_AGENT_GPUS %q: cluster:N is for the kubernetes executor", gpus)
	}
	switch gpus {
	case "":
	case "auto":
		cfg.DetectGPUs = gpu.Detect
	case "none":
		cfg.DetectGPUs = func(context.Context) ([]protocol.GPU, error) { return nil, nil }
	default:
		sim, err := gpu.Simulated(gpus)
		if err != nil {
			return fmt.Errorf("invalid NIMBUS_AGENT_GPUS %q: auto, none or simulate:N[:MODEL] (%v)", gpus, err)
		}
		cfg.DetectGPUs = func(context.Context) ([]protocol.GPU, error) { return sim, nil }
		cfg.SimulatedGPUs = true
		log := newLogger(stderr, logFormat, logLevel)
		log.Warn("!!! SIMULATED GPUS: GPU pipelines are scheduled and billed here but run without a GPU !!!", "gpus", len(sim))
	}
	cfg.Executors = map[string]agent.NewExecutor{executor.ModeKubernetes: func(ctx context.Context, id, cli string) (executor.Executor, error) {
		kc := kube
		kc.AgentID, kc.CLI = id, cli
		return kubernetes.New(ctx, kc)
	}}
	cfg.Version = version
	cfg.RequireRegistration = true
	log := newLogger(stderr, logFormat, logLevel)
	log.Info("nimbus-agent starting", "version", version, "server", cfg.ServerURL)
	a, err := agent.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx)
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
