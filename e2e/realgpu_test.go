//go:build gpu

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// The brief's promise on a real NVIDIA GPU, where no test of `make test` can go (CI has no GPU):
// `make gpu-check` builds this file (build tag gpu) on a GPU host and runs it after the container
// check. The all-in-one server (SQLite, embedded Redis) and one real nimbus-agent that found the
// GPU with nvidia-smi run a push of two pipelines: a CPU one and a GPU one that trains a small
// model with PyTorch for real. The agent runs jobs as host processes (the shell executor): a GPU
// host without a Docker engine is where this check usually runs, and a container's GPU is what
// nimbus-gpucheck checks. Asserted:
//   - the agent advertises the GPU's class tags, from nvidia-smi;
//   - the GPU job sees exactly the GPU nvidia-smi lists (by name and UUID), and its training
//     loss falls; its metric reaches the server;
//   - the CPU job of the same build sees no GPU at all ("CPU steps never hold GPU time");
//   - the GPU pipeline is billed at the GPU price for its real run time, the CPU one from the
//     free quota, and the ledger adds up.
//
// Needs on the host: nvidia-smi, git, and a python3 with torch built for the GPU (or
// NIMBUS_GPU_PYTHON naming one).
func TestRealGPUPipeline(t *testing.T) {
	smi, err := exec.Command("nvidia-smi", "--query-gpu=index,name,uuid", "--format=csv,noheader").Output()
	if err != nil {
		t.Fatalf("nvidia-smi: %v (this check needs a host with an NVIDIA GPU)", err)
	}
	first := strings.Split(strings.Split(strings.TrimSpace(string(smi)), "\n")[0], ", ")
	if len(first) != 3 {
		t.Fatalf("nvidia-smi answered %q", smi)
	}
	gpuName, gpuUUID := first[1], first[2]
	python := os.Getenv("NIMBUS_GPU_PYTHON")
	if python == "" {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Fatal("no python3 on PATH; set NIMBUS_GPU_PYTHON to a python with torch")
		}
	}

	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	server := start(t, dir, []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_DATA_DIR=" + filepath.Join(dir, "data"),
		"NIMBUS_BUILTIN_AGENT=false", "NIMBUS_AGENT_REGISTRATION_TOKEN=gpu-check", "NIMBUS_SCHEDULER_TICK=1s"}, "nimbus-server")
	waitReady(t, base, server, 60*time.Second)
	alice := newClient(t, base)
	alice.signup("alice") // the install's first user: a platform admin
	alice.createOrg("ml")
	alice.createRepo("ml", apiclient.NewRepo{Name: "trainer"})
	alice.grantCredits("ml", "10", "gpu money")
	token := alice.newToken("git", "repo:write")
	api := tokenClient(t, base, token)
	w := &world{t: t, base: base, alice: alice, api: api, token: token}

	agentDir := t.TempDir()
	agent := start(t, agentDir, []string{"NIMBUS_SERVER_URL=" + base, "NIMBUS_AGENT_TOKEN=gpu-check", "NIMBUS_AGENT_EXECUTOR=shell",
		"NIMBUS_AGENT_GPUS=auto", "NIMBUS_AGENT_WORK_DIR=" + agentDir, "NIMBUS_AGENT_CPUS=32",
		"PATH=" + filepath.Dir(python) + string(os.PathListSeparator) + os.Getenv("PATH")}, "nimbus-agent")

	// The agent registers with the GPU's class among its tags.
	var agents []apiclient.Agent
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		agents, err = alice.api.PlatformAgents(t.Context())
		alice.check("agents", err)
		if len(agents) == 1 && agents[0].Online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not come online: %+v\n%s", agents, agent.stderr)
		}
	}
	if !strings.Contains(" "+strings.Join(agents[0].Tags, " ")+" ", " cnb:arch:amd64:gpu ") {
		t.Fatalf("the agent's tags %v lack cnb:arch:amd64:gpu", agents[0].Tags)
	}
	t.Logf("agent tags: %v", agents[0].Tags)

	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	files := map[string]string{
		".cnb.yml": `main:
  push:
    - name: cpu
      runner: { tags: cnb:arch:amd64, cpus: 2 }
      stages:
        - name: look
          script: python3 -c "import torch; print('cpu job sees', torch.cuda.device_count(), 'GPUs')"
    - name: gpu
      runner: { tags: cnb:arch:amd64:gpu }
      stages:
        - name: train
          script: |
            echo "visible=$CUDA_VISIBLE_DEVICES"
            nvidia-smi -L
            python3 train.py
`,
		"train.py": `import torch
assert torch.cuda.device_count() == 1, torch.cuda.device_count()
dev = torch.device("cuda")
props = torch.cuda.get_device_properties(dev)
print("device", props.name, "uuid", "GPU-" + str(props.uuid))
torch.manual_seed(0)
x = torch.randn(65536, 64, device=dev)
w_true = torch.randn(64, 1, device=dev)
y = x @ w_true + 0.01 * torch.randn(65536, 1, device=dev)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(301):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print("step", step, "loss", float(loss))
torch.cuda.synchronize()
print("##[set-output metric.loss=%f]" % float(loss))
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "train on the GPU")
	gitRun(t, work, "push", "-q", "http://alice:"+token+"@"+addr+"/ml/trainer.git", "main")

	var b apiclient.Build
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if api.do("GET", "/api/v1/repos/ml/trainer/builds/1", nil, &b) == 200 && b.Status != "queued" && b.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build did not end within 5 minutes: %+v\nagent:\n%s", b, agent.stderr)
		}
	}
	logs := map[string]string{}
	for _, p := range b.Pipelines {
		logs[p.Name] = w.jobLog(p.Stages[0].Jobs[0].ID)
		t.Logf("pipeline %s: %s\n%s", p.Name, p.Status, logs[p.Name])
	}
	if b.Status != "success" {
		t.Fatalf("build %s: %+v", b.Status, b.Pipelines)
	}

	// The GPU job saw exactly the GPU nvidia-smi lists, and trained on it.
	gpu := logs["gpu"]
	if !strings.Contains(gpu, "visible=0") || !strings.Contains(gpu, "device "+gpuName) || !strings.Contains(gpu, gpuUUID) {
		t.Errorf("the GPU job did not see %s (%s) alone:\n%s", gpuName, gpuUUID, gpu)
	}
	losses := regexp.MustCompile(`step (\d+) loss ([0-9.e+-]+)`).FindAllStringSubmatch(gpu, -1)
	if len(losses) != 4 {
		t.Fatalf("the training printed %d loss lines, want 4:\n%s", len(losses), gpu)
	}
	firstLoss, _ := strconv.ParseFloat(losses[0][2], 64)
	lastLoss, _ := strconv.ParseFloat(losses[3][2], 64)
	if !(lastLoss < firstLoss/10) {
		t.Errorf("the loss went from %g to %g: the model did not train", firstLoss, lastLoss)
	}
	metrics, err := api.api.Metrics(t.Context(), "ml", "trainer", "", "loss")
	api.check("metrics", err)
	if len(metrics.Points) != 1 || metrics.Points[0].Value > firstLoss/10 {
		t.Errorf("the loss metric did not reach the server: %+v", metrics)
	}
	// The CPU job of the same build saw no GPU.
	if !strings.Contains(logs["cpu"], "cpu job sees 0 GPUs") {
		t.Errorf("the CPU job saw a GPU:\n%s", logs["cpu"])
	}

	// Billing: the GPU pipeline at the GPU price, the CPU one from the free quota; the ledger
	// adds up (the same check as the other billing e2e tests, on the install's own API).
	kinds := w.checkLedgerAddsUp("ml")
	acct := alice.billing("ml")
	if amount(t, acct.Balance) >= amount(t, "10") {
		t.Errorf("the GPU run cost nothing: balance %s after a 10.00 grant; ledger %v", acct.Balance, kinds)
	}
	t.Logf("GPU %s (%s): loss %g → %g; balance after the run %s; ledger %v", gpuName, gpuUUID, firstLoss, lastLoss, acct.Balance, kinds)
}
