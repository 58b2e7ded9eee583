// Package kubernetes is the agent's Kubernetes executor: each pipeline one pod on a cluster,
// every step exec'ed into the container of its image (agent/executor/README.md, "Kubernetes",
// says how and why). It is a package of its own so that only nimbus-agent links client-go: the
// server's built-in agent and every test binary that starts an agent stay without it.
package kubernetes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/inpod"
)

// Labels of every pod the Kubernetes executor creates: `kubectl get pods -l nimbus.dev/team=…`
// says what runs for whom.
const (
	KubeLabelAgent    = "nimbus.dev/agent"
	KubeLabelLease    = "nimbus.dev/lease"
	KubeLabelTeam     = "nimbus.dev/team"
	KubeLabelPipeline = "nimbus.dev/pipeline"
)

// Config says which cluster, where in it and how the executor's pods run.
type Config struct {
	// Kubeconfig is a kubeconfig file; "" means the in-cluster configuration (the agent runs in
	// a pod with a service account), else $KUBECONFIG.
	Kubeconfig string
	// Namespace holds every pipeline pod; "" means "nimbus-jobs".
	Namespace string
	// AgentID labels every pod, so a restarted agent finds what it left (Cleanup).
	AgentID string
	// HostNetwork runs the pods in their node's network namespace: for clusters where a pod
	// cannot reach the Nimbus server otherwise (the single-node test cluster, whose pods have no
	// network). Off by default.
	HostNetwork bool
	// PullPolicy of the job images; "" means IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Classes map runner tags to where and how their pods run; the class of the most specific
	// tag a pipeline names is its, else the one under "*", else none (anywhere, requests =
	// limits).
	Classes map[string]Class
	// CLI is the statically linked nimbus CLI the executor puts into every pod (internal/inpod).
	CLI string
	// StartTimeout bounds the wait for a pod whose containers fail to start (image pull, a bad
	// configuration); a pod waiting for capacity waits as long as the pipeline may run. 0 means
	// 5 minutes.
	StartTimeout time.Duration
}

// Class is where the pods of a runner class run.
type Class struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	RuntimeClass string              `json:"runtimeClassName,omitempty"`
	// GPUResource is the extended resource a GPU pipeline requests; "" means nvidia.com/gpu.
	GPUResource string `json:"gpuResource,omitempty"`
	// CPURequest is the CPU a pipeline's pod asks the scheduler for ("500m", "2"); "" means its
	// runner.cpus. Less overcommits the nodes: pipelines may still use runner.cpus (the limit)
	// when the node has it free.
	CPURequest string `json:"cpuRequest,omitempty"`
	// MemoryRequest is the memory it asks for ("4Gi"); "" means the class's memory.
	MemoryRequest string `json:"memoryRequest,omitempty"`
	// GPUs is how many a pipeline of a GPU class requests; 0 means 1.
	GPUs int `json:"gpus,omitempty"`
}

// Executor runs each pipeline in one pod of its own (see the README's "Kubernetes" section
// for the layout and why): a container per image the pipeline uses, idle until the agent execs
// a step into it (internal/inpod), the checkout in an emptyDir volume all of them mount.
type Executor struct {
	cfg  Config
	rest *rest.Config
	core corev1client.CoreV1Interface

	mu   sync.Mutex
	pods map[string]*kubePod // by checkout
	seq  atomic.Uint64       // step ids
	// anchor owns every pod of this agent (Cleanup makes it): delete it and Kubernetes'
	// garbage collector deletes them.
	anchor *metav1.OwnerReference
}

type kubePod struct {
	name       string
	pullSecret string // "" when its images need no credentials
	mount      string
	container  map[string]string // image -> container name
	spec       executor.PipelineSpec
}

// New connects to the cluster and checks that it answers, that the namespace exists and that
// the agent may list pods there.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	for tag, c := range cfg.Classes {
		for name, q := range map[string]string{"cpuRequest": c.CPURequest, "memoryRequest": c.MemoryRequest} {
			if q == "" {
				continue
			}
			if _, err := resource.ParseQuantity(q); err != nil {
				return nil, fmt.Errorf("executor: class %q: %s %q: %w", tag, name, q, err)
			}
		}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "nimbus-jobs"
	}
	if cfg.PullPolicy == "" {
		cfg.PullPolicy = corev1.PullIfNotPresent
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 5 * time.Minute
	}
	var rc *rest.Config
	var err error
	switch {
	case cfg.Kubeconfig != "":
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	case os.Getenv("KUBECONFIG") != "":
		rc, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	default:
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("executor: kubernetes configuration: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("executor: kubernetes client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Listing pods there is what the agent may do (deploy/kubernetes/executor/rbac.yaml) and
	// proves both the namespace and the rights.
	if _, err := core.Pods(cfg.Namespace).List(pctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("executor: pods in kubernetes namespace %q: %w", cfg.Namespace, err)
	}
	return &Executor{cfg: cfg, rest: rc, core: core, pods: map[string]*kubePod{}}, nil
}

// Name is "kubernetes".
func (k *Executor) Name() string { return executor.ModeKubernetes }

// Close releases nothing: pods end with their pipelines.
func (k *Executor) Close() error { return nil }

// Cleanup deletes the pods an earlier run of this agent left: a restarted agent's leases are
// gone, so nothing may keep running for them unbilled. It also makes sure of the agent's
// anchor: a ConfigMap in the pods' namespace that owns every pod the agent creates, so that
// deleting it (the agent retired: `kubectl delete configmap -l nimbus.dev/agent=…`) has
// Kubernetes' garbage collector delete them. (An owner must be in its dependents' namespace:
// the agent's own pod, in another one, cannot be.)
func (k *Executor) Cleanup(ctx context.Context) error {
	err := k.core.Pods(k.cfg.Namespace).DeleteCollection(ctx, deleteNow(),
		metav1.ListOptions{LabelSelector: KubeLabelAgent + "=" + k.cfg.AgentID})
	if err != nil {
		return fmt.Errorf("executor: delete leftover pods: %w", err)
	}
	cms := k.core.ConfigMaps(k.cfg.Namespace)
	name := AnchorName(k.cfg.AgentID)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{KubeLabelAgent: k.cfg.AgentID}},
			Data:       map[string]string{"about": "nimbus-agent " + k.cfg.AgentID + " owns the pipeline pods labelled with it; deleting this deletes them"},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("executor: the agent's anchor %s: %w", name, err)
	}
	k.mu.Lock()
	k.anchor = &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
	k.mu.Unlock()
	return nil
}

// AnchorName is the name of the ConfigMap that owns an agent's pods.
func AnchorName(agentID string) string {
	return kubeName("nimbus-agent-"+strings.ToLower(agentID), "-", '-', "-")
}

// PodName is the name of a lease's pod.
func PodName(lease string) string {
	return kubeName("nimbus-"+strings.ToLower(lease), "-", '-', "-")
}

// kubeName keeps the lowercase letters, digits and the runes of extra in s, replacing others
// with repl, cuts it to Kubernetes' 63 characters and trims trim off both ends.
func kubeName(s, extra string, repl rune, trim string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(extra, r) {
			return r
		}
		return repl
	}, s)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, trim)
}

// StartPipeline creates the pipeline's pod, waits until its containers run (as long as the
// pipeline may, while the pod waits for capacity; spec.Waiting hears why), puts the nimbus CLI
// and the checkout into it. On error nothing is left behind.
func (k *Executor) StartPipeline(ctx context.Context, spec executor.PipelineSpec) error {
	if len(spec.Images) == 0 {
		return errors.New("executor: a pipeline pod needs at least one image")
	}
	kp := &kubePod{name: PodName(spec.Lease), mount: spec.CheckoutMount, container: map[string]string{}, spec: spec}
	if kp.mount == "" {
		kp.mount = "/workspace"
	}
	pod := k.podFor(kp, spec)
	if auths := pullAuths(spec.Images); auths != nil {
		// The images' registry credentials: a pull secret of the pod's own (its name in the
		// spec, never its values), owned by the anchor and deleted with the pod.
		kp.pullSecret = kp.name + "-pull"
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: kp.pullSecret, Labels: pod.Labels, OwnerReferences: k.owners()},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: auths},
		}
		if _, err := k.core.Secrets(k.cfg.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("executor: the pull secret of pod %s: %w", kp.name, err)
		}
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: kp.pullSecret}}
	}
	pods := k.core.Pods(k.cfg.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		k.deletePullSecret(kp)
		return fmt.Errorf("executor: create pod %s: %w", kp.name, err)
	}
	k.mu.Lock()
	k.pods[spec.Checkout] = kp
	k.mu.Unlock()
	fail := func(err error) error {
		k.EndPipeline(spec.Checkout)
		return err
	}
	if err := k.waitRunning(ctx, kp.name, spec.Waiting); err != nil {
		return fail(err)
	}
	first := kp.container[spec.Images[0].Name]
	if err := k.upload(ctx, kp.name, first); err != nil {
		return fail(err)
	}
	if err := k.copyIn(ctx, kp, first, spec.Checkout); err != nil {
		return fail(err)
	}
	return nil
}

// EndPipeline deletes the pipeline's pod at once (no grace: its steps have ended or are being
// cancelled) and forgets it.
func (k *Executor) EndPipeline(checkout string) {
	k.mu.Lock()
	kp := k.pods[checkout]
	delete(k.pods, checkout)
	k.mu.Unlock()
	if kp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := k.core.Pods(k.cfg.Namespace).Delete(ctx, kp.name, deleteNow())
	if err != nil && !apierrors.IsNotFound(err) {
		// The next Cleanup (the agent's start) deletes it; activeDeadlineSeconds ends it anyway.
		fmt.Fprintf(os.Stderr, "executor: delete pod %s: %v\n", kp.name, err)
	}
	k.deletePullSecret(kp)
}

// deletePullSecret deletes the pod's pull secret, if it has one.
func (k *Executor) deletePullSecret(kp *kubePod) {
	if kp.pullSecret == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := k.core.Secrets(k.cfg.Namespace).Delete(ctx, kp.pullSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		// Its anchor owns it: the agent's retirement removes it.
		fmt.Fprintf(os.Stderr, "executor: delete pull secret %s: %v\n", kp.pullSecret, err)
	}
}

// pullAuths is the .dockerconfigjson of the images' registry credentials; nil when none has any.
func pullAuths(ims []executor.PipelineImage) []byte {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	auths := map[string]entry{}
	for _, im := range ims {
		if im.Auth == nil {
			continue
		}
		auths[registryOf(im.Name)] = entry{Username: im.Auth.User, Password: im.Auth.Password,
			Auth: base64.StdEncoding.EncodeToString([]byte(im.Auth.User + ":" + im.Auth.Password))}
	}
	if len(auths) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"auths": auths})
	return b
}

// registryOf is the registry host of an image reference, as a pull secret names it: its first
// part when that is a host (a dot, a port or localhost), else Docker Hub's.
func registryOf(ref string) string {
	host, _, ok := strings.Cut(ref, "/")
	if ok && (strings.ContainsAny(host, ".:") || host == "localhost") {
		return host
	}
	return "https://index.docker.io/v1/"
}

// CopyOut copies the pod's checkout back into the agent's (for the built-in tasks the agent
// runs itself, which read files the jobs wrote).
func (k *Executor) CopyOut(ctx context.Context, checkout string) error {
	kp := k.pod(checkout)
	if kp == nil {
		return fmt.Errorf("executor: no pod for %s", checkout)
	}
	var stderr bytes.Buffer
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- inpod.Untar(checkout, pr) }()
	code, err := k.exec(ctx, kp.name, kp.container[kp.spec.Images[0].Name],
		[]string{inpod.CLI, inpod.CommandName, "tar", kp.mount}, nil, pw, &stderr)
	pw.CloseWithError(errors.Join(err, exitErr(code, &stderr)))
	uerr := <-done
	if err != nil || code != 0 {
		return fmt.Errorf("executor: copy the checkout out of pod %s: %w", kp.name, errors.Join(err, exitErr(code, &stderr)))
	}
	return uerr
}

func exitErr(code int, stderr *bytes.Buffer) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(stderr.String()))
}

func deleteNow() metav1.DeleteOptions {
	zero := int64(0)
	bg := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &bg}
}

func (k *Executor) pod(checkout string) *kubePod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[checkout]
}

// podFor is the pipeline's pod: one container per image, each idle under `sleep` until steps are
// exec'ed into it; the checkout and the tool directory are emptyDir volumes all of them mount.
func (k *Executor) podFor(kp *kubePod, spec executor.PipelineSpec) *corev1.Pod {
	labels := map[string]string{KubeLabelAgent: k.cfg.AgentID, KubeLabelLease: labelValue(spec.Lease)}
	if spec.Team != "" {
		labels[KubeLabelTeam] = labelValue(spec.Team)
	}
	if spec.Pipeline != "" {
		labels[KubeLabelPipeline] = labelValue(spec.Pipeline)
	}
	class := k.classOf(spec.Tags)
	no := false
	grace := int64(0)
	var deadline *int64
	if spec.MaxDuration > 0 {
		d := int64(spec.MaxDuration / time.Second)
		deadline = &d
	}
	mounts := []corev1.VolumeMount{{Name: "checkout", MountPath: kp.mount}, {Name: "nimbus-tools", MountPath: inpod.ToolDir}}
	var containers []corev1.Container
	for i, im := range spec.Images {
		name := "job-" + strconv.Itoa(i)
		kp.container[im.Name] = name
		res := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
		if spec.CPUs > 0 {
			res.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(spec.CPUs*1000), resource.DecimalSI)
		}
		if spec.MemoryBytes > 0 {
			res.Limits[corev1.ResourceMemory] = *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI)
		}
		// The pod asks the scheduler for one pipeline's worth: the first container requests what
		// the class gives, the others (idle but for their steps) next to nothing. Each may use
		// up to the class's limit.
		if i == 0 {
			maps.Copy(res.Requests, res.Limits)
			if class.CPURequest != "" {
				res.Requests[corev1.ResourceCPU] = resource.MustParse(class.CPURequest)
			}
			if class.MemoryRequest != "" {
				res.Requests[corev1.ResourceMemory] = resource.MustParse(class.MemoryRequest)
			}
			if n := class.GPUs; spec.GPU {
				if n == 0 {
					n = 1
				}
				gpu := corev1.ResourceName(class.gpuResource())
				res.Limits[gpu] = *resource.NewQuantity(int64(n), resource.DecimalSI)
				res.Requests[gpu] = res.Limits[gpu]
			}
		} else {
			res.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
			res.Requests[corev1.ResourceMemory] = resource.MustParse("16Mi")
		}
		containers = append(containers, corev1.Container{
			Name:  name,
			Image: im.Name,
			// Idle until a step is exec'ed in; the container's own entrypoint does not run.
			Command:         []string{"/bin/sh", "-c", "exec sleep 2147483647"},
			WorkingDir:      kp.mount,
			ImagePullPolicy: k.cfg.PullPolicy,
			Resources:       res,
			VolumeMounts:    mounts,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kp.name, Namespace: k.cfg.Namespace, Labels: labels,
			Annotations: map[string]string{"nimbus.dev/images": strings.Join(imageNames(spec.Images), " ")}, OwnerReferences: k.owners()},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			HostNetwork:                   k.cfg.HostNetwork,
			TerminationGracePeriodSeconds: &grace,
			ActiveDeadlineSeconds:         deadline,
			NodeSelector:                  class.NodeSelector,
			Tolerations:                   class.Tolerations,
			Containers:                    containers,
			ShareProcessNamespace:         &no,
			Volumes: []corev1.Volume{
				{Name: "checkout", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "nimbus-tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if class.RuntimeClass != "" {
		rc := class.RuntimeClass
		p.Spec.RuntimeClassName = &rc
	}
	return p
}

// owners are the owner references of a new pod: the agent's anchor, once Cleanup made it.
func (k *Executor) owners() []metav1.OwnerReference {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.anchor == nil {
		return nil
	}
	return []metav1.OwnerReference{*k.anchor}
}

func imageNames(ims []executor.PipelineImage) []string {
	out := make([]string, len(ims))
	for i, im := range ims {
		out[i] = im.Name
	}
	return out
}

// classOf is the class of the most specific configured tag the pipeline names, else "*"'s.
func (k *Executor) classOf(tags []string) Class {
	best := "*"
	for _, t := range tags {
		if _, ok := k.cfg.Classes[t]; ok && (best == "*" || len(t) > len(best)) {
			best = t
		}
	}
	return k.cfg.Classes[best]
}

func (c Class) gpuResource() string {
	if c.GPUResource != "" {
		return c.GPUResource
	}
	return "nvidia.com/gpu"
}

// labelValue makes s a valid label value (63 characters of [A-Za-z0-9._-]).
func labelValue(s string) string {
	return kubeName(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ._-", '_', "._-")
}

// waitRunning waits until every container of the pod runs. A pod the scheduler cannot place
// waits (waiting hears why, once per new reason); a container that cannot start fails it after
// StartTimeout; a pod that ended fails it at once.
func (k *Executor) waitRunning(ctx context.Context, name string, waiting func(string)) error {
	pods := k.core.Pods(k.cfg.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var said string
	say := func(reason string) {
		if reason != said && waiting != nil {
			waiting(reason)
		}
		said = reason
	}
	defer say("")
	var startProblem time.Time
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("executor: pod %s: %w", name, err)
		}
		done, reason, problem := podState(p)
		switch {
		case done:
			return nil
		case problem != "":
			if startProblem.IsZero() {
				startProblem = time.Now()
			}
			if time.Since(startProblem) > k.cfg.StartTimeout || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return fmt.Errorf("executor: pod %s did not start: %s", name, problem)
			}
			say("")
		case reason != "":
			say(reason)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: p.ResourceVersion})
		if err != nil {
			return fmt.Errorf("executor: watch pod %s: %w", name, err)
		}
		timer := time.NewTimer(5 * time.Second) // re-check now and then: a watch may go quiet
	wait:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
				break wait
			case ev, ok := <-w.ResultChan():
				if !ok {
					break wait
				}
				if ev.Type == watch.Deleted {
					w.Stop()
					timer.Stop()
					return fmt.Errorf("executor: pod %s was deleted before it started", name)
				}
				if ev.Type == watch.Modified {
					break wait
				}
			}
		}
		w.Stop()
		timer.Stop()
	}
}

// podState says whether all of the pod's containers run, why it waits for a place (capacity),
// or what keeps a container from starting.
func podState(p *corev1.Pod) (running bool, waiting, problem string) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, "", fmt.Sprintf("the pod ended (%s): %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false, waitingReason(p, c.Message), ""
		}
	}
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false, "", ""
	}
	all := true
	var problems []string
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
		case cs.State.Waiting != nil:
			all = false
			switch cs.State.Waiting.Reason {
			case "ContainerCreating", "PodInitializing", "":
			default:
				problems = append(problems, fmt.Sprintf("%s (%s): %s %s", cs.Name, cs.Image, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			}
		case cs.State.Terminated != nil:
			all = false
			problems = append(problems, fmt.Sprintf("%s (%s) exited: %s %s", cs.Name, cs.Image, cs.State.Terminated.Reason, cs.State.Terminated.Message))
		}
	}
	sort.Strings(problems)
	return all, "", strings.Join(problems, "; ")
}

// waitingReason words the scheduler's message for a person: what the pod waits for.
func waitingReason(p *corev1.Pod, msg string) string {
	var gpu string
	for _, c := range p.Spec.Containers {
		for r := range c.Resources.Requests {
			if r != corev1.ResourceCPU && r != corev1.ResourceMemory {
				gpu = string(r)
			}
		}
	}
	if gpu != "" && strings.Contains(msg, "Insufficient "+gpu) {
		return fmt.Sprintf("waiting for a node with a free %s (%s; the cluster may be scaling up)", gpu, strings.TrimSpace(msg))
	}
	if msg == "" {
		msg = "not scheduled yet"
	}
	return fmt.Sprintf("waiting for a node (%s; the cluster may be scaling up)", strings.TrimSpace(msg))
}

// upload writes the agent's nimbus CLI into the pod's tool volume through the first container's
// shell: every container then has it at inpod.CLI.
func (k *Executor) upload(ctx context.Context, pod, container string) error {
	if k.cfg.CLI == "" {
		return errors.New("executor: the Kubernetes executor needs the static nimbus CLI (none was found beside the agent or on PATH)")
	}
	f, err := os.Open(k.cfg.CLI)
	if err != nil {
		return fmt.Errorf("executor: the nimbus CLI for the pod: %w", err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	code, err := k.exec(ctx, pod, container, inpod.Upload(), f, io.Discard, &stderr)
	if err == nil && code != 0 {
		err = exitErr(code, &stderr)
	}
	if err != nil {
		return fmt.Errorf("executor: put the nimbus CLI into pod %s (the image needs sh, cat, chmod and mv): %w", pod, err)
	}
	return nil
}

// copyIn streams the agent's checkout into the pod's.
func (k *Executor) copyIn(ctx context.Context, kp *kubePod, container, checkout string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(inpod.Tar(checkout, pw)) }()
	var stderr bytes.Buffer
	code, err := k.exec(ctx, kp.name, container, []string{inpod.CLI, inpod.CommandName, "untar", kp.mount}, pr, io.Discard, &stderr)
	pr.Close()
	if err == nil && code != 0 {
		err = exitErr(code, &stderr)
	}
	if err != nil {
		return fmt.Errorf("executor: copy the checkout into pod %s: %w", kp.name, err)
	}
	return nil
}

// Run execs the step into the container of its image and waits for it. Ending ctx kills the
// step's process group in the pod (internal/inpod's kill).
func (k *Executor) Run(ctx context.Context, s executor.Step) (int, error) {
	kp := k.pod(s.Checkout)
	if kp == nil {
		return -1, fmt.Errorf("executor: no pod runs the pipeline of %s", s.Checkout)
	}
	container, ok := kp.container[s.Image]
	if !ok {
		return -1, fmt.Errorf("executor: image %s was not known when the pipeline's pod started: on Kubernetes every image of a pipeline is started with it, so an image named by a variable set while it runs is not supported", s.Image)
	}
	if s.Script == "" && len(s.Args) == 0 {
		return -1, errors.New("executor: a step that runs its image's own command is not supported by the Kubernetes executor yet")
	}
	id := "s" + strconv.FormatUint(k.seq.Add(1), 10)
	h := inpod.Header{ID: id, Script: s.Script, Args: s.Args, Env: s.Env, Dir: kp.mount,
		PathAppend: append(slices.Clone(s.PathAppend), inpod.ToolDir)}
	var stdin bytes.Buffer
	if err := inpod.WriteHeader(&stdin, h); err != nil {
		return -1, err
	}
	stdout, stderr := s.Output, s.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = stdout
	}
	// The exec itself runs on without ctx: a step is stopped by killing its process group in the
	// pod (inpod's kill), after which its exec ends with the output it had.
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := k.exec(context.WithoutCancel(ctx), kp.name, container, inpod.Command(), &stdin, stdout, stderr)
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var kerr bytes.Buffer
	code, err := k.exec(kctx, kp.name, container, inpod.KillCommand(id), nil, io.Discard, &kerr)
	if err == nil && code != 0 {
		err = exitErr(code, &kerr)
	}
	if err != nil {
		// The pipeline's end deletes the pod, which ends the step for certain.
		return -1, errors.Join(ctx.Err(), fmt.Errorf("executor: stop step in pod %s: %w", kp.name, err))
	}
	select {
	case <-done:
	case <-kctx.Done():
	}
	return -1, ctx.Err()
}

// exec runs cmd in a container of the pod and returns its exit code.
func (k *Executor) exec(ctx context.Context, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	req := k.core.RESTClient().Post().Resource("pods").Namespace(k.cfg.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(k.rest, "GET", req.URL().String())
	if err != nil {
		return -1, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var ce utilexec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ce):
		return ce.Code, nil
	}
	return -1, fmt.Errorf("executor: exec in pod %s/%s: %w", pod, container, err)
}
