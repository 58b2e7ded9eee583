package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// The newcomer's journeys (issues 19 and 35): TestNewcomerPathInChromium walks the brief's
// example from sign-up to a GPU pipeline without money, its top-up, the agent the admin adds
// and the run on it, CPU and GPU pipelines of one push on their own hosts, and the schedules;
// TestNewcomerWorkspaceLeftByAFullPageLoad the workspace left through the address bar. The
// model push from a Docker job on the all-in-one server with its defaults is
// TestModelFromPipelineToInference (artifacts_test.go).

// newcomerCI: on push, a CPU pipeline downloads the nimbus CLI from the server itself and lints
// the repo's file with it, then stays busy a while; by hand (web_trigger_train), a GPU pipeline
// that no agent of this installation can run.
const newcomerCI = `main:
  push:
    - name: cli
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: hello
          script: echo "hello from the first job"
        - name: lint
          jobs:
            - name: nimbus-lint
              script: |
                wget -q -O /tmp/nimbus "$CNB_WEB_ENDPOINT/downloads/nimbus-linux-amd64"
                chmod +x /tmp/nimbus
                /tmp/nimbus lint .cnb.yml && echo "the downloaded nimbus lint passed"
                sleep 45
  web_trigger_train:
    - name: train-gpu
      runner: { tags: cnb:arch:amd64:gpu }
      docker: { image: IMAGE }
      stages:
        - name: fit
          script: echo training
`

// newcomerBroken has an error (a GPU model this installation does not have) and a warning (a
// key in snake case) for the build page to show as the linter prints them.
const newcomerBroken = `broken:
  push:
    - runner:
        tags: cnb:arch:amd64:gpu:A100
      stages:
        - name: fit
          script: python train.py
          allow_failure: true
`

// Issue 19's newcomer path in a real headless Chromium against the real server (PostgreSQL,
// Redis, a real Docker agent for CPU pipelines and none for GPU, no mail server, no Stripe): the
// CLI downloaded from the server runs in a job; "Run a build" offers the file's declared
// events; the GPU pipeline it starts waits with both of its reasons and their links; the
// billing page says who grants credit and shows the prices; the platform admin grants credit
// in the admin area and the balance moves; the GPU pipeline fails after the queue timeout with
// what it waited for; a broken file shows its lines with a caret and the linter's hint; an
// invitation without mail shows its link. Then (issue 35) the re-run's card links the admin
// to the Agents page, whose simulated-GPU start command, with a token made there, starts an
// agent the re-run runs on; one push of the brief's train-cpu and train-gpu runs each on its
// own kind of host; and the repo page lists the nightly schedule with its next run in the
// billing zone and Run now. A screenshot at each step goes to e2e/screenshots/.
func TestNewcomerPathInChromium(t *testing.T) {
	// 90 s: long enough for the re-run to wait while the admin adds a GPU agent on a loaded machine.
	w := newWorld(t, "NIMBUS_QUEUE_TIMEOUT=90s")
	b := startBrowser(t, w.base, 80)
	w.agent("", "NIMBUS_AGENT_NETWORK=host")
	n := w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(newcomerCI, "IMAGE", w.image)})

	// newWorld signed alice up first: she is the installation's platform admin.
	b.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Fml%2Ftrainer"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	b.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	b.waitJS("the build in the repo's list", fmt.Sprintf(`location.pathname === '/ml/trainer' && !!document.querySelector('tr[data-build="%d"]')`, n), 15*time.Second)

	// The CLI, downloaded from the server inside the job, runs there.
	cli := w.waitFor(n, 60*time.Second, "the cli pipeline running", func(b apiclient.Build) bool { return len(b.Pipelines) > 0 && b.Pipelines[0].Status == "running" })
	job := cli.Pipelines[0].Stages[1].Jobs[0].ID
	b.do("open the lint job", 10*time.Second, chromedp.Navigate(fmt.Sprintf("%s/ml/trainer/builds/%d/jobs/%d", w.base, n, job)))
	b.waitJS("the downloaded CLI's lint passing in the log", `(document.querySelector('.logview') || {}).innerText?.includes('the downloaded nimbus lint passed')`, 60*time.Second)
	// The job page: the build's jobs beside the log with their states, the job's own state in
	// step with its streaming log, and a time on every line on request.
	b.waitJS("the side list of jobs", `(() => { const l = document.querySelector('nav.joblist'); if (!l) return false
		const hello = l.querySelector('li:first-child .badge'), lint = l.querySelector('a[aria-current=page] .badge')
		return l.innerText.includes('hello') && !!hello && hello.dataset.status === 'success' && !!lint && lint.dataset.status === 'running' })()`, 15*time.Second)
	if got, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('h1 .badge').dataset.status`)); got != "running" {
		t.Errorf("the job streams its log but says %q", got)
	}
	b.do("turn timestamps on", 10*time.Second, clickOn("input[name=timestamps]"))
	b.waitJS("a time on every line", `(() => { const ts = [...document.querySelectorAll('.logview .ln .ts')]
		return ts.length > 0 && ts.every(t => /^\d\d:\d\d:\d\d$/.test(t.textContent)) })()`, 15*time.Second)
	b.shot("newcomer-cli-in-job")

	// Run a build: the branch's declared events, with the pipelines each runs.
	b.do("open the repo", 10*time.Second, chromedp.Navigate(w.base+"/ml/trainer"))
	b.waitJS("open Run a build", `(() => { if (document.querySelector('[data-testid=events]')) return true
		const open = [...document.querySelectorAll('button')].find(x => x.textContent === 'Run a build…'); if (open) open.click(); return false })()`, 15*time.Second)
	events := b.text("[data-testid=events]")
	if !strings.Contains(events, "web_trigger_train") || !strings.Contains(events, "runs 1 pipeline: train-gpu") {
		t.Errorf("Run a build offers %q", events)
	}
	if got := b.text("[data-testid=other-events]"); !strings.Contains(got, "push") {
		t.Errorf("the other declared events: %q", got)
	}
	b.shot("newcomer-run-a-build")
	b.do("run web_trigger_train", 10*time.Second, clickOn(`form[aria-labelledby=trigger-h] button[type=submit]`))
	gpuBuild := n + 1
	b.waitJS("the GPU build's page", fmt.Sprintf(`location.pathname === '/ml/trainer/builds/%d'`, gpuBuild), 15*time.Second)

	// It waits, and says why: no agent for the tag and no money, each with its remedy.
	const gpu = `article[aria-label="Pipeline train-gpu"]`
	b.waitJS("both blockers with their links", `(() => {
		const p = document.querySelector('`+gpu+`'); if (!p) return false
		const na = p.querySelector('[data-blocker=no_agent]'), bal = p.querySelector('[data-blocker=balance]')
		return !!na && na.textContent.includes('no online agent serves cnb:arch:amd64:gpu') && !!na.querySelector('a[data-remedy=platform_agents]') &&
			!!bal && bal.textContent.includes('balance insufficient') && !!bal.querySelector('a[data-remedy=topup]')
	})()`, 20*time.Second)
	if got := b.text("h1 .badge"); !strings.Contains(strings.ToLower(got), "waiting") {
		t.Errorf("the build's badge says %q, want waiting", got)
	}
	// Every card and its blocker text are within the page's width: the cards wrap, nothing
	// is cut off to the right (a strip that scrolled sideways hid the GPU card at 1366 px).
	if over, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('article.pipeline, article.pipeline .blockers')]
		.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.getAttribute('aria-label') || e.className).join(', ')`)); err != nil || over != "" {
		t.Errorf("past the page's right edge: %q (%v)", over, err)
	}
	b.shot("newcomer-gpu-waiting")

	// Top up → Billing: no payments here, so it names who grants credit; the prices are there.
	b.do("follow the top-up link", 10*time.Second, clickOn(gpu+" a[data-remedy=topup]"))
	b.waitJS("billing names who grants credit", `(document.querySelector('[data-testid=no-topups]') || {}).textContent?.includes('Ask alice')`, 15*time.Second)
	b.waitJS("the pricing panel", `(document.querySelector('[data-class="cnb:arch:amd64:gpu"]') || {}).textContent?.includes('8.00 CNY at 16 cores')`, 15*time.Second)
	for sel, want := range map[string]string{
		"[data-testid=freeze-rule]":                       "next 5 minutes are reserved",
		"[data-testid=free-quota-rule]":                   "160 free CPU core-hours",
		`[data-class="cnb:arch:amd64"]`:                   "0.125 CNY",
		"[data-testid=usage-zone]":                        "Asia/Shanghai, UTC+08:00",
		"[data-testid=pricing-zone]":                      "Asia/Shanghai, UTC+08:00",
		`[data-class="cnb:arch:amd64:gpu"] td:last-child`: "no",
	} {
		if got := b.text(sel); !strings.Contains(got, want) {
			t.Errorf("%s says %q, want %q in it", sel, got, want)
		}
	}
	if got := b.text("[data-testid=balance]"); got != "0.00 CNY" {
		t.Errorf("balance before the grant %q", got)
	}
	b.shot("newcomer-billing-pricing")

	// The platform admin grants credit in the admin area; the balance moves.
	b.do("go grant credit", 10*time.Second, clickOn(`[data-testid=no-topups] a`))
	b.waitJS("the admin's teams page", `location.pathname === '/admin/teams' && !!document.querySelector('form[aria-labelledby=grant-h] select[name=team]')`, 15*time.Second)
	if team, _ := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS("select[name=team]"))); team != "ml" {
		t.Errorf("the grant form is for %q, want ml", team)
	}
	b.do("fill the grant", 10*time.Second, typeInto("input[name=amount]", "20"), typeInto("input[name=note]", "first credit"))
	b.do("grant", 10*time.Second, clickOn(`form[aria-labelledby=grant-h] button[type=submit]`))
	b.waitJS("the grant and the team's new balance", `(document.querySelector('[data-testid=granted]') || {}).textContent === 'Granted 20.00 CNY to ml.' &&
		(document.querySelector('tr[data-team=ml] [data-testid=team-balance]') || {}).textContent === '20.00 CNY'`, 15*time.Second)
	b.shot("newcomer-admin-grant")
	b.do("back to billing", 10*time.Second, chromedp.Navigate(w.base+"/orgs/ml/billing"))
	b.waitJS("the balance moved", `(document.querySelector('[data-testid=balance]') || {}).textContent === '20.00 CNY'`, 15*time.Second)

	// Money is no longer the reason; the agent still is, until the queue timeout fails it.
	b.do("back to the GPU build", 10*time.Second, chromedp.Navigate(fmt.Sprintf("%s/ml/trainer/builds/%d", w.base, gpuBuild)))
	b.waitJS("only the agent blocker left", `(() => { const p = document.querySelector('`+gpu+`'); return !!p && !!p.querySelector('[data-blocker=no_agent]') && !p.querySelector('[data-blocker=balance]') })()`, 20*time.Second)

	// Meanwhile: a broken file shows its lines with a caret, the hint, and the CLI to check it.
	gitRun(t, w.work, "checkout", "-q", "-b", "broken")
	if err := os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte(newcomerBroken), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, w.work, "commit", "-q", "-am", "try an A100")
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, w.work, "push", "-q", u.String(), "broken")
	broken := gpuBuild + 1
	w.waitFor(broken, 15*time.Second, "the broken build failed", func(b apiclient.Build) bool { return b.Status == "failed" })
	b.do("open the broken build", 10*time.Second, chromedp.Navigate(fmt.Sprintf("%s/ml/trainer/builds/%d", w.base, broken)))
	b.waitJS("the error with its lines and caret", `!!document.querySelector('.diagnostics [data-severity=error] pre.excerpt')`, 15*time.Second)
	errText := b.text(".diagnostics [data-severity=error]")
	for _, want := range []string{".cnb.yml:4:15", `unknown runner tag "cnb:arch:amd64:gpu:A100"`, " 4 |         tags: cnb:arch:amd64:gpu:A100\n   |               ^", "Hint: known tags:"} {
		if !strings.Contains(errText, want) {
			t.Errorf("the error lacks %q:\n%s", want, errText)
		}
	}
	if warn := b.text(".diagnostics [data-severity=warning]"); !strings.Contains(warn, `Did you mean "allowFailure"?`) || !strings.Contains(warn, "^") {
		t.Errorf("the warning: %q", warn)
	}
	if href, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector('.diagnostics [data-testid=cli-download]') || {}).getAttribute?.('href') || ''`)); href != "/downloads/nimbus-linux-amd64" {
		t.Errorf("the lint pointer links %q", href)
	}
	b.shot("newcomer-broken-file")

	// An invitation without a mail server: said so, with the link to pass on.
	b.do("open members", 10*time.Second, chromedp.Navigate(w.base+"/orgs/ml/members"))
	b.do("invite bob", 15*time.Second, chromedp.WaitVisible(chromedp.CSS("form.card input")), typeInto("form.card input", "bob@example.com"),
		clickOn("form.card button[type=submit]"))
	b.waitJS("the unsent invitation and its link", `(document.querySelector('[data-testid=invitation-unsent]') || {}).textContent?.includes('No email was sent to bob@example.com') &&
		[...document.querySelectorAll('.notice .copyfield input')].some(i => i.value.includes('/invitations/accept'))`, 15*time.Second)
	b.shot("newcomer-invitation-link")
	// The link's page names the team, the role and who invited, before anyone accepts.
	link, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.notice .copyfield input')].map(i => i.value).find(v => v.includes('/invitations/accept')) || ''`))
	if err != nil || !strings.HasPrefix(link, w.base+"/invitations/accept?token=") {
		t.Fatalf("invitation link %q: %v", link, err)
	}
	b.do("open the invitation link", 10*time.Second, chromedp.Navigate(link))
	b.waitJS("the accept page naming team and role", `/^alice invited you to join ml as (reporter|billing|developer|admin|owner)\.$/.test((document.querySelector('[data-testid=invitation-offer]') || {}).textContent || '')`, 15*time.Second)
	b.shot("newcomer-accept-page")

	// The runner classes' page prices them too.
	b.do("open the team's agents", 10*time.Second, chromedp.Navigate(w.base+"/orgs/ml/agents"))
	b.waitJS("the pricing on the agents page", `(document.querySelector('[data-testid=pricing] [data-class="cnb:arch:amd64:gpu"]') || {}).textContent?.includes('0.50 CNY')`, 15*time.Second)

	// The account page (from the username): email, sessions (this one marked), tokens; the team
	// switcher still names the team on a page whose address names none.
	b.do("open the account page", 10*time.Second, clickOn(".me a"))
	b.waitJS("the account page", `location.pathname === '/account' && (document.querySelector('[data-testid=account-email]') || {}).textContent === 'alice@example.com' &&
		[...document.querySelectorAll('[data-testid=session]')].some(r => r.textContent.includes('this browser'))`, 15*time.Second)
	if team, _ := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS("#team-switcher"))); team != "ml" {
		t.Errorf("the team switcher on /account says %q, want ml", team)
	}
	// The status symbols come from the bundled font, not whatever the machine has.
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.fonts.load('16px "Nimbus Symbols"', '✓⏸').then(f => f.length)`, chromedp.EvalAwaitPromise)); err != nil || n < 2 {
		t.Errorf("the bundled symbol font: %d faces loaded (%v)", n, err)
	}
	b.shot("newcomer-account")

	// The queue timeout fails the GPU pipeline with what it waited for.
	w.waitFor(gpuBuild, 120*time.Second, "the GPU build failed", func(b apiclient.Build) bool { return b.Status == "failed" })
	b.do("back to the failed GPU build", 10*time.Second, chromedp.Navigate(fmt.Sprintf("%s/ml/trainer/builds/%d", w.base, gpuBuild)))
	b.waitJS("the failure's reason", `(document.querySelector('`+gpu+` .reason') || {}).textContent?.includes('gave up after 90 seconds in the queue: no online agent serves cnb:arch:amd64:gpu')`, 15*time.Second)
	b.shot("newcomer-gpu-timed-out")

	// Re-run failed jobs, beside Re-run all; the new build links its original.
	b.waitJS("re-run the failed jobs", `(() => { if (location.pathname !== '/ml/trainer/builds/`+itoa(gpuBuild)+`') return true
		const btn = [...document.querySelectorAll('.actions button')].find(x => x.textContent === 'Re-run failed jobs')
		if (btn && [...document.querySelectorAll('.actions button')].some(x => x.textContent === 'Re-run all')) btn.click(); return false })()`, 15*time.Second)
	b.waitJS("the re-run links its original", `(document.querySelector('[data-testid=rerun-of] a') || {}).textContent === 'Build #`+itoa(gpuBuild)+`'`, 15*time.Second)
	b.shot("newcomer-rerun-failed")
	rerun, err := chromedp.Run(b.ctx, chromedp.Evaluate[int64](`Number(location.pathname.split('/').pop())`))
	if err != nil || rerun <= gpuBuild {
		t.Fatalf("the re-run's number: %d (%v)", rerun, err)
	}

	// The re-run waits for a GPU agent. For the platform admin its card links to the admin
	// Agents page, whose simulated-GPU command, filled in with a token made there, starts one;
	// the pipeline then runs on it, paid from the credit granted above.
	b.waitJS("the re-run's blocker links the admin Agents page", `!!document.querySelector('`+gpu+` [data-blocker=no_agent] a[data-remedy=platform_agents][href="/admin/agents"]')`, 20*time.Second)
	b.do("follow Add an agent", 10*time.Second, clickOn(gpu+" a[data-remedy=platform_agents]"))
	const setup = `section[aria-label="Add an agent"]`
	b.waitJS("the admin Agents page with its start commands", `location.pathname === '/admin/agents' && !!document.querySelector('`+setup+` [data-command=simulated-gpu] input')`, 15*time.Second)
	b.do("make a registration token", 10*time.Second, typeInto(setup+" form input", "sim gpu"), clickOn(setup+" form button[type=submit]"))
	b.waitJS("the commands with the new token", `(document.querySelector('`+setup+` [data-command=simulated-gpu] input') || {}).value?.includes('--token nbg_')`, 15*time.Second)
	b.shot("newcomer-add-an-agent")
	command, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('`+setup+` [data-command=simulated-gpu] input').value`))
	args := strings.Fields(command)
	if err != nil || len(args) < 5 || args[0] != "nimbus-agent" || args[1] != "--server" || args[2] != w.base {
		t.Fatalf("the simulated-GPU command %q (%v)", command, err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { releaseAgentDir(t, dir) })
	// The command as the page gives it; the environment only says where Docker is.
	start(t, dir, []string{"NIMBUS_AGENT_EXECUTOR=docker", "NIMBUS_AGENT_DOCKER_HOST=" + w.docker, "NIMBUS_AGENT_NETWORK=host",
		"NIMBUS_AGENT_DEFAULT_IMAGE=" + w.image}, "nimbus-agent", args[1:]...)
	w.waitFor(rerun, 80*time.Second, "the re-run GPU build ran on the new agent", func(b apiclient.Build) bool { return b.Status == "success" })
	b.do("back to the re-run", 10*time.Second, chromedp.Navigate(fmt.Sprintf("%s/ml/trainer/builds/%d", w.base, rerun)))
	b.waitJS("the re-run on sim-gpu", `(document.querySelector('`+gpu+` [data-testid=host]') || {}).textContent?.startsWith('on sim-gpu')`, 15*time.Second)
	b.shot("newcomer-gpu-ran")

	// One push with a CPU and a GPU pipeline, a CPU agent and a GPU agent, both free: each runs
	// on its own kind of host (a GPU host serves no CPU class unless its operator says so). Its
	// nightly schedule shows on the repo page, with its next run and Run now.
	both := rerun + 1
	w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(newcomerBoth, "IMAGE", w.image)})
	done := w.waitFor(both, 90*time.Second, "the CPU and GPU pipelines of one push", func(b apiclient.Build) bool { return b.Status == "success" })
	for _, p := range done.Pipelines {
		host := ""
		if p.Host != nil {
			host = p.Host.Name
		}
		if (p.Name == "train-gpu") != (host == "sim-gpu") || host == "" {
			t.Errorf("pipeline %s ran on %q", p.Name, host)
		}
	}
	b.do("open the repo", 10*time.Second, chromedp.Navigate(w.base+"/ml/trainer"))
	b.waitJS("the schedules list", `!!document.querySelector('tr[data-schedule]')`, 15*time.Second)
	row := b.text("tr[data-schedule]")
	for _, want := range []string{"main", "0 2 * * *", "GMT+8", "alice", "Run now"} {
		if !strings.Contains(row, want) {
			t.Errorf("the schedule's row %q lacks %q", row, want)
		}
	}
	b.shot("newcomer-schedules")
}

// newcomerBoth is the brief's first example as a push: train-cpu and train-gpu, and a nightly
// schedule.
const newcomerBoth = `main:
  push:
    - name: train-cpu
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: prepare
          script: echo preparing the data
    - name: train-gpu
      runner: { tags: cnb:arch:amd64:gpu }
      docker: { image: IMAGE }
      stages:
        - name: fit
          script: echo training
  "crontab: 0 2 * * *":
    - name: nightly
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: evaluate
          script: echo nightly
`

// Issue 35, item 2: a workspace whose page is left through the address bar (a full page load
// elsewhere, which may keep the old page, its terminal's WebSocket with it, in Chrome's
// back-forward cache and never send a close) is no longer "connected": within 10 s the API
// says it has no connection and its idle countdown has started. Measured from the moment the
// address is entered; whether Chromium kept the page in its back-forward cache is logged.
func TestNewcomerWorkspaceLeftByAFullPageLoad(t *testing.T) {
	begin := time.Now()
	w := newWorld(t)
	b := startBrowser(t, w.base, 100)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(workspaceBrowserCI, "IMAGE", w.image)})
	// workspaceBrowserCI's keepAliveTimeout: the idle countdown's length.
	const idleTimeout = 300 * time.Second

	b.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Fml%2Ftrainer"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	b.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	b.waitJS("the repo page with its Open workspace button", `location.pathname === '/ml/trainer' && !!document.querySelector('[data-testid=open-workspace]')`, 15*time.Second)
	b.do("click Open workspace", 10*time.Second, clickOn("[data-testid=open-workspace]"))
	b.waitJS("the workspace's page", `/^\/ml\/trainer\/workspaces\/\d+$/.test(location.pathname) && !!document.querySelector('h1 [data-workspace-state]')`, 15*time.Second)
	id, err := chromedp.Run(b.ctx, chromedp.Evaluate[int64](`Number(location.pathname.split('/').pop())`))
	if err != nil || id <= 0 {
		t.Fatalf("the workspace's id: %d (%v)", id, err)
	}

	// Ready, and its terminal connected: the page says so, and so does the API.
	b.waitJS("the workspace ready", `(document.querySelector('h1 [data-workspace-state]') || {}).dataset?.workspaceState === 'ready'`, 120*time.Second)
	const term = `[data-testid=terminal][data-active=true]`
	b.waitJS("the terminal connected", `(document.querySelector('`+term+`') || {}).dataset?.state === 'open' && !!document.querySelector('`+term+` .xterm-rows')`, 30*time.Second)
	on := w.waitWorkspace(id, 15*time.Second, "connected", func(v apiclient.Workspace) bool { return v.Connections != nil && *v.Connections >= 1 })
	if on.IdleDeadline != nil {
		t.Errorf("a connected workspace has an idle deadline: %v", *on.IdleDeadline)
	}

	// Whether Chrome keeps the page in its back-forward cache: pagehide's persisted, kept in
	// the tab's sessionStorage, which the next page of the same origin reads.
	b.do("watch the page leave", 5*time.Second, chromedp.Evaluate[chromedp.Void](
		`addEventListener('pagehide', e => sessionStorage.setItem('e2e-left-persisted', String(e.persisted))); 0`))

	// Leave through the address bar: a full page load of another page of the server.
	left := time.Now()
	b.do("leave through the address bar", 20*time.Second, chromedp.Navigate(w.base+"/ml/trainer"))
	loaded := time.Since(left)
	var off apiclient.Workspace
	var took time.Duration
	for {
		off = w.api.workspace(id)
		took = time.Since(left)
		if off.Connections != nil && *off.Connections == 0 && off.IdleDeadline != nil {
			break
		}
		if off.State != "ready" {
			t.Fatalf("workspace %d left %v ago is no longer ready: %+v", id, took.Round(100*time.Millisecond), off)
		}
		// Past 10 s it has failed; polled on to 30 s, to say by how much.
		if took > 30*time.Second {
			b.shot("newcomer-workspace-left")
			bfcache, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('e2e-left-persisted') || 'no pagehide seen'`))
			t.Fatalf("workspace %d still connected %v after its page was left (into the back-forward cache: %s): connections %v, idle_deadline %v",
				id, took.Round(100*time.Millisecond), bfcache, intOrNil(off.Connections), off.IdleDeadline)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bfcache, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('e2e-left-persisted') || 'no pagehide seen'`))
	t.Logf("the workspace left through the address bar (the next page loaded in %v; into the back-forward cache: %s) had no connection and an idle deadline after %v",
		loaded.Round(10*time.Millisecond), bfcache, took.Round(10*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the idle countdown of a workspace whose page was left started after %v, want within 10 s", took.Round(100*time.Millisecond))
	}
	// The countdown started when the page was left (not before: the terminal was connected),
	// and runs the workspace's keepAliveTimeout from there.
	if started := off.IdleDeadline.Add(-idleTimeout); started.Before(left.Add(-3*time.Second)) || started.After(left.Add(took+time.Second)) {
		t.Errorf("the idle countdown started at %v, %v after the page was left (idle_deadline %v)",
			started.Format(time.RFC3339Nano), started.Sub(left).Round(100*time.Millisecond), off.IdleDeadline)
	}
	b.waitJS("the repo page", `location.pathname === '/ml/trainer' && !!document.querySelector('[data-testid=open-workspace]')`, 15*time.Second)
	b.shot("newcomer-workspace-left")

	// Back: the page comes out of the cache and its terminal reattaches to the same shell.
	// (history.back(): a restore from the cache fires no load event for NavigateBack to wait for.)
	b.do("go back", 10*time.Second, chromedp.Evaluate[chromedp.Void](`history.back(); 0`))
	// Polled from Go: the page swap ends the execution context a chromedp.Poll would run in.
	for again := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`/\/workspaces\/\d+$/.test(location.pathname) && (document.querySelector('`+term+`') || {}).dataset?.state === 'open'`))
		if err == nil && ok {
			break
		}
		if time.Since(again) > 30*time.Second {
			t.Fatalf("the terminal did not reconnect after going back: %v", err)
		}
	}
	w.waitWorkspace(id, 15*time.Second, "connected again", func(v apiclient.Workspace) bool {
		return v.Connections != nil && *v.Connections >= 1 && v.IdleDeadline == nil
	})
	t.Logf("took %v in all", time.Since(begin).Round(100*time.Millisecond))
}

func intOrNil(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}
