package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

const buttonsBrowserCI = `$:
  web_trigger_deploy:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: deploy
          script: echo "region=$REGION note=$NOTE target=$TARGET"
`

const buttonsBrowserFile = `branch:
  - reg: "^main$"
    buttons:
      - name: Deploy
        description: Deploy the model
        event: web_trigger_deploy
        env: { TARGET: prod }
        inputs:
          REGION: { name: Region, type: select, required: true, default: eu, options: [ { name: Europe, value: eu }, { name: Asia, value: ap } ] }
          NOTE: { name: Note, type: input }
`

// startBrowser starts a headless Chromium for the test and returns its tab; screenshots count
// on from n.
func startBrowser(t *testing.T, base string, n int) *browser {
	t.Helper()
	chromiumPath := chromium(t)
	if _, err := os.Stat(filepath.Join("..", "frontend", "dist", "index.html")); err != nil {
		if testenv.CI() {
			t.Fatal("frontend/dist is not built; make test builds it first")
		}
		t.Skip("frontend/dist is not built; run make build")
	}
	if status, body := get(t, base+"/"); status != 200 || !strings.Contains(body, `<div id="root">`) {
		if testenv.CI() {
			t.Fatalf("the server binary was built without the dashboard (status %d)", status)
		}
		t.Skipf("this server binary was built without the dashboard (status %d); build with make build", status)
	}
	shots := "screenshots"
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(home, "profile")), chromedp.WindowSize(1280, 900), chromedp.NoInheritEnv,
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home, "PATH="+os.Getenv("PATH")))
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx, base: base, shots: shots, n: n}
}

// A .cnb/web_trigger.yml button with two inputs, pressed in the dashboard in a real Chromium,
// runs its pipeline with those inputs (and its fixed env) in env.
func TestButtonInChromium(t *testing.T) {
	w := newWorld(t)
	b := startBrowser(t, w.base, 40)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(buttonsBrowserCI, "IMAGE", w.image), ".cnb/web_trigger.yml": buttonsBrowserFile})

	b.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Fml%2Ftrainer"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	b.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	b.waitJS("the repo page with the Deploy button", `location.pathname === '/ml/trainer' && !!document.querySelector('[data-button="Deploy"]')`, 15*time.Second)
	b.do("open the Deploy button's form", 10*time.Second, clickOn(`[data-button="Deploy"]`), chromedp.WaitVisible(chromedp.CSS("select[name=REGION]")))
	b.do("choose Asia", 10*time.Second, chromedp.SetValue(chromedp.CSS("select[name=REGION]"), "ap"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('select[name=REGION]').dispatchEvent(new Event('change', {bubbles: true}))`))
	b.do("write a note", 10*time.Second, typeInto("input[name=NOTE]", "from the button"))
	b.shot("button-form")
	b.do("press", 10*time.Second, clickOn("[data-testid=press]"))
	b.waitJS("the new build's page", `/^\/ml\/trainer\/builds\/\d+$/.test(location.pathname)`, 15*time.Second)
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	n, _ := strconv.ParseInt(regexp.MustCompile(`/builds/(\d+)$`).FindStringSubmatch(loc)[1], 10, 64)
	build := w.waitBuildSuccess(n, 2*time.Minute)
	if build.Event != "web_trigger_deploy" {
		t.Errorf("the build's event is %q", build.Event)
	}
	if log := w.jobLog(build.Pipelines[0].Stages[0].Jobs[0].ID); !strings.Contains(log, "region=ap note=from the button target=prod") {
		t.Errorf("the job did not get the inputs in env:\n%s", log)
	}
	b.shot("button-build")
}
