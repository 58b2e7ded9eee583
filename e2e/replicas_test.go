package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// balancer is the replicas' load balancer: a small reverse proxy in the test (not haproxy). Each
// request goes to a random replica that is up; a replica that refuses the connection (killed)
// is skipped and the next one tried, as a balancer's health check would take it out. Bodies are
// buffered so a retried request is whole; WebSockets and server-sent events pass through.
type balancer struct {
	mu       sync.Mutex
	backends []string // host:port
	down     map[string]bool
	srv      *http.Server
}

func startBalancer(t testing.TB, addr string, backends []string) *balancer {
	lb := &balancer{backends: backends, down: map[string]bool{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "replica"
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport:     lb,
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	lb.srv = &http.Server{Handler: proxy}
	go lb.srv.Serve(ln)
	t.Cleanup(func() { lb.srv.Close() })
	return lb
}

func (lb *balancer) setDown(addr string, down bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.down[addr] = down
}

// RoundTrip sends the request to a random replica that is up, trying the others when the
// connection is refused.
func (lb *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	lb.mu.Lock()
	order := rand.Perm(len(lb.backends))
	var up []string
	for _, i := range order {
		if !lb.down[lb.backends[i]] {
			up = append(up, lb.backends[i])
		}
	}
	lb.mu.Unlock()
	var lastErr error
	for _, b := range up {
		out := req.Clone(req.Context())
		out.URL.Host = b
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
		}
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			return nil, err
		}
	}
	if lastErr == nil {
		lastErr = errors.New("balancer: no replica up")
	}
	return nil, lastErr
}

type replica struct {
	addr string
	env  []string
	proc *proc
	dir  string
}

// Issue 18's scale-out proof with real processes: three nimbus-server replicas behind a load
// balancer, on PostgreSQL, a Redis Cluster of three masters and MinIO, sharing DATA_DIR (the git
// repositories), with four Docker agents. 200 pipelines are pushed through random replicas
// while one replica is killed with SIGKILL and restarted. Every pipeline runs exactly once (its
// log holds its lines once, in order) and is settled exactly once (one settle entry each, and
// the ledger adds up); each cron fire time makes exactly one build; a live-log stream opened on
// one replica sees the lines other replicas ingest; a workspace terminal reaches its agent from
// every replica.
func TestReplicasUnderFaults(t *testing.T) {
	t.Parallel() // waits more than it computes: it overlaps the other slow worlds (harness_test.go)
	w := &world{t: t, dir: t.TempDir(), work: t.TempDir()}
	w.image, w.docker = testenv.Image(t), testenv.DockerHost(t)
	lbAddr := freeAddr(t)
	w.base = "http://" + lbAddr
	data := t.TempDir()
	common := append(s3Env(t, false), "NIMBUS_DATABASE_URL="+storetest.PostgresURL(t), "NIMBUS_REDIS_URL="+testenv.RedisClusterURL(t),
		"NIMBUS_SECRET_KEY="+strings.Repeat("5e", 32), "NIMBUS_AGENT_REGISTRATION_TOKEN=e2e-registration", "NIMBUS_SCHEDULER_TICK=1s",
		"NIMBUS_LEASE_TTL=6s", "NIMBUS_PUBLIC_URL="+w.base, "NIMBUS_DATA_DIR="+data, "NIMBUS_BILLING_FREE_CPU_CORE_HOURS=0")
	replicas := make([]*replica, 3)
	var addrs []string
	for i := range replicas {
		addr := freeAddr(t)
		r := &replica{addr: addr, dir: t.TempDir(), env: append(append([]string(nil), common...), "NIMBUS_LISTEN="+addr, "NIMBUS_INTERNAL_URL=http://"+addr)}
		r.proc = start(t, r.dir, r.env, "nimbus-server")
		replicas[i] = r
		addrs = append(addrs, addr)
		waitReady(t, "http://"+addr, r.proc, 60*time.Second)
	}
	lb := startBalancer(t, lbAddr, addrs)

	alice := newClient(t, w.base)
	alice.signup("alice")
	w.alice = alice
	alice.createOrg("ml")
	alice.createRepo("ml", apiclient.NewRepo{Name: "trainer"})
	alice.grantCredits("ml", "100", "cpu money")
	w.token = alice.newToken("git", "repo:write")
	w.api = tokenClient(t, w.base, w.token)
	gitRun(t, w.work, "init", "-q", "-b", "main")
	for range 4 {
		w.agent("")
	}

	// One cron fire during the run: a minute at least 40 s away (fire times are whole minutes;
	// schedules fire at most every 5 minutes, so an hourly one).
	now := time.Now()
	fireAt := now.Truncate(time.Minute).Add(time.Minute)
	if fireAt.Sub(now) < 40*time.Second {
		fireAt = fireAt.Add(time.Minute)
	}
	const lines = 12
	var loop strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&loop, " line-%d", i)
	}
	pipelineYAML := func(name, script string) string {
		return "    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image +
			" }\n      stages:\n        - name: only\n          script: " + script + "\n"
	}
	job := "echo run-$CNB_PIPELINE_ID; for l in" + loop.String() + "; do echo $l; done; echo done-$CNB_PIPELINE_ID"
	var cnb strings.Builder
	cnb.WriteString("main:\n  push:\n")
	for i := 1; i <= 4; i++ {
		cnb.WriteString(pipelineYAML(fmt.Sprintf("p%d", i), job))
	}
	fmt.Fprintf(&cnb, "  \"crontab: %d * * * *\":\n", fireAt.Minute())
	cnb.WriteString(pipelineYAML("cron", "echo cron-fired"))
	cnb.WriteString("$:\n  vscode:\n    - runner: { tags: cnb:arch:amd64, cpus: 1 }\n      docker: { image: " + w.image +
		" }\n      services:\n        - name: vscode\n          options: { keepAliveTimeout: 600000 }\n      stages:\n        - name: prepare\n          script: echo prepared\n")
	os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte(cnb.String()), 0o644)

	pushTo := func(addr string) {
		t.Helper()
		u, _ := url.Parse("http://" + addr + "/ml/trainer.git")
		u.User = url.UserPassword("alice", w.token)
		gitRun(t, w.work, "add", ".")
		gitRun(t, w.work, "commit", "-q", "--allow-empty", "-m", "run")
		gitRun(t, w.work, "push", "-q", u.String(), "main")
	}
	const pushes = 50 // × 4 pipelines = 200
	victim := replicas[1]
	var killedAt, restartedAt time.Time
	for i := 0; i < pushes; i++ {
		if i == pushes/3 {
			// SIGKILL: no drain, no deregistration, long-polls and tunnels cut.
			victim.proc.cmd.Process.Signal(syscall.SIGKILL)
			err := <-victim.proc.done
			victim.proc.done <- err
			lb.setDown(victim.addr, true)
			killedAt = time.Now()
		}
		if i == pushes/2 {
			victim.proc = start(t, victim.dir, victim.env, "nimbus-server")
			waitReady(t, "http://"+victim.addr, victim.proc, 60*time.Second)
			lb.setDown(victim.addr, false)
			restartedAt = time.Now()
		}
		var live []string
		for _, r := range replicas {
			if r != victim || killedAt.IsZero() || !restartedAt.IsZero() {
				live = append(live, r.addr)
			}
		}
		pushTo(live[rand.IntN(len(live))])
	}
	t.Logf("pushed %d builds; replica %s killed at push %d, back at push %d (%v down)", pushes, victim.addr, pushes/3, pushes/2,
		restartedAt.Sub(killedAt).Round(100*time.Millisecond))

	// builds lists the repo's builds of an event (or events with that prefix: a schedule's event
	// is its key, "crontab: …"), oldest first (the cron build may fall between pushes).
	builds := func(event string) []int64 {
		list := w.api.builds("ml", "trainer", 100)
		var out []int64
		for i := len(list) - 1; i >= 0; i-- {
			if strings.HasPrefix(list[i].Event, event) {
				out = append(out, list[i].Number)
			}
		}
		slices.Sort(out)
		return out
	}
	pushed := builds("push")
	if len(pushed) != pushes {
		t.Fatalf("%d push builds, want %d", len(pushed), pushes)
	}

	// Every build succeeds; every pipeline's log has its lines once, in order.
	for _, n := range pushed {
		b := w.waitFor(n, 5*time.Minute, "the end", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
		if b.Status != "success" || len(b.Pipelines) != 4 {
			t.Errorf("build #%d: %s %+v", n, b.Status, b.Pipelines)
			continue
		}
		for _, p := range b.Pipelines {
			log := w.jobLog(p.Stages[0].Jobs[0].ID)
			if strings.Count(log, "run-"+itoa(p.ID)+"\n") != 1 || strings.Count(log, "done-"+itoa(p.ID)+"\n") != 1 {
				t.Errorf("build #%d pipeline %s ran other than once:\n%s", n, p.Name, log)
				continue
			}
			at := 0
			for i := 1; i <= lines; i++ {
				k := strings.Index(log[at:], fmt.Sprintf("line-%d\n", i))
				if k < 0 {
					t.Errorf("build #%d pipeline %s: line-%d missing or out of order:\n%s", n, p.Name, i, log)
					break
				}
				at += k
			}
		}
	}

	// A live-log stream opened on one replica sees what the others ingest (the agent's log
	// appends go through the balancer, to any replica).
	cnb2 := strings.Replace(cnb.String(), "main:\n  push:\n", "main:\n  push:\n"+pipelineYAML("live", "for l in"+loop.String()+"; do echo live-$l; sleep 0.3; done")+"", 1)
	os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte(cnb2), 0o644)
	pushTo(addrs[0])
	var liveN int64
	for deadline := time.Now().Add(30 * time.Second); liveN == 0; {
		if ns := builds("push"); len(ns) == pushes+1 {
			liveN = ns[pushes]
		} else if time.Now().After(deadline) {
			t.Fatalf("the live build did not appear: %v", ns)
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	liveBuild := w.waitFor(liveN, time.Minute, "the live pipeline running", func(b apiclient.Build) bool {
		for _, p := range b.Pipelines {
			if p.Name == "live" && p.Status == "running" {
				return true
			}
		}
		return false
	})
	var liveJob int64
	for _, p := range liveBuild.Pipelines {
		if p.Name == "live" {
			liveJob = p.Stages[0].Jobs[0].ID
		}
	}
	got := make(chan string, 100)
	go streamLog(t, "http://"+replicas[2].addr, w.token, liveJob, got)
	seen := map[string]bool{}
	deadline := time.After(time.Minute)
	for len(seen) < lines {
		select {
		case l := <-got:
			if strings.HasPrefix(l, "live-line-") {
				seen[l] = true
			}
		case <-deadline:
			t.Fatalf("the stream on replica %s saw %d of %d lines", replicas[2].addr, len(seen), lines)
		}
	}
	w.waitBuildSuccess(liveN, 2*time.Minute)

	// Each cron fire time made exactly one build.
	for time.Now().Before(fireAt.Add(5 * time.Second)) {
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)
	cron := builds("crontab")
	if len(cron) != 1 {
		t.Errorf("the fire time %s made %d builds, want 1: %v", fireAt.Format(time.TimeOnly), len(cron), cron)
	} else {
		w.waitBuildSuccess(cron[0], time.Minute)
	}

	// Settled exactly once: one settle entry per pipeline that ran, and the ledger adds up.
	ran := map[int64]bool{}
	for _, n := range append(builds("push"), cron...) {
		for _, p := range w.build(n).Pipelines {
			ran[p.ID] = true
		}
	}
	settles := map[int64]int{}
	var bal, frozen billing.Amount
	cursor := ""
	for {
		page := alice.ledgerPage("ml", cursor)
		for _, e := range page.Items {
			if e.Kind == "settle" && e.PipelineID != nil {
				settles[*e.PipelineID]++
			}
			bal += amount(t, e.BalanceChange)
			frozen += amount(t, e.FrozenChange)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	for id := range ran {
		if settles[id] != 1 {
			t.Errorf("pipeline %d settled %d times", id, settles[id])
		}
	}
	if len(settles) != len(ran) {
		t.Errorf("%d pipelines settled, %d ran", len(settles), len(ran))
	}
	acct := alice.billing("ml")
	if got := bal.Display() + "/" + frozen.Display(); got != acct.Balance+"/"+acct.Frozen {
		t.Errorf("the ledger sums to %s, the account shows %s/%s", got, acct.Balance, acct.Frozen)
	}

	// A workspace's terminal reaches its agent from every replica.
	id := w.openWorkspace(2 * time.Minute)
	w.waitWorkspace(id, 30*time.Second, "reachable", func(v apiclient.Workspace) bool { return v.Connections != nil })
	for i, r := range replicas {
		w.base = "http://" + r.addr
		term := w.dialTerminal(id, "")
		term.send(fmt.Sprintf("echo via-replica-$((%d+1))\n", i))
		term.expect(fmt.Sprintf("via-replica-%d", i+1), 20*time.Second)
		term.ws.Close()
	}
	w.base = "http://" + lbAddr
	t.Logf("%d pipelines ran and were settled once each; cron fired once at %s; the workspace's terminal answered on all 3 replicas",
		len(ran), fireAt.Format(time.TimeOnly))
}
