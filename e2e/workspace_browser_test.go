package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// workspaceBrowserCI: a workspace on the default branch ("$": every branch) in the test image,
// with a preparation stage whose log the build shows, and a keepAliveTimeout long enough that
// it cannot recycle while the test looks at it.
const workspaceBrowserCI = `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      services:
        - name: vscode
          options: { keepAliveTimeout: 300000 }
      stages:
        - name: prepare
          script: echo preparing the workspace
`

// A cloud workspace from the dashboard in a real headless Chromium against the real server and
// a real nimbus-agent (Docker executor): sign in → the repo → "Open workspace" → the
// workspace's page shows it come up and become ready → its web terminal (xterm.js over the
// terminal WebSocket, a real PTY in the workspace container) runs what is typed into it → the
// team's workspaces page lists it → Stop. Screenshots go to e2e/screenshots/, numbered after
// the dashboard journey's.
func TestWorkspaceInChromium(t *testing.T) {
	w := newWorld(t)
	// The dashboard journey's screenshots are 01–16.
	b := startBrowser(t, w.base, 16)
	ctx := b.ctx
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(workspaceBrowserCI, "IMAGE", w.image)})

	// Sign in as alice (newWorld signed her up through the API).
	b.do("open the login page", 20*time.Second, chromedp.Navigate(w.base+"/login?next=%2Fml%2Ftrainer"), chromedp.WaitVisible(chromedp.CSS("input[name=login]")))
	b.do("sign in", 10*time.Second, typeInto("input[name=login]", "alice"), typeInto("input[name=password]", "a long enough passphrase"),
		clickOn("button[type=submit]"))
	b.waitJS("the repo page with its Open workspace button", `location.pathname === '/ml/trainer' && !!document.querySelector('[data-testid=open-workspace]')`, 15*time.Second)
	b.shot("workspace-repo")

	// Open workspace → the new workspace's page.
	b.do("click Open workspace", 10*time.Second, clickOn("[data-testid=open-workspace]"))
	b.waitJS("the workspace's page", `/^\/ml\/trainer\/workspaces\/\d+$/.test(location.pathname) && !!document.querySelector('h1 [data-workspace-state]')`, 15*time.Second)
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	m := regexp.MustCompile(`/workspaces/(\d+)$`).FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("the workspace page is at %s", loc)
	}
	id := m[1]
	if !strings.Contains(b.text(".wsfacts"), "cnb:arch:amd64") {
		t.Errorf("the workspace's facts do not show its runner class: %q", b.text(".wsfacts"))
	}
	b.shot("workspace-starting")

	// Ready (the agent says so), and the terminal connects.
	b.waitJS("the workspace ready", `(document.querySelector('h1 [data-workspace-state]') || {}).dataset?.workspaceState === 'ready'`, 120*time.Second)
	const term = `[data-testid=terminal][data-active=true]`
	b.waitJS("the terminal connected", `(document.querySelector('`+term+`') || {}).dataset?.state === 'open' && !!document.querySelector('`+term+` .xterm-rows')`, 30*time.Second)
	// The shell's prompt, before typing (not fatal: a shell may print none).
	promptCtx, cancelPrompt := context.WithTimeout(ctx, 10*time.Second)
	chromedp.Do(promptCtx, chromedp.Poll[chromedp.Void](`(document.querySelector('`+term+` .xterm-rows') || {}).textContent?.trim().length > 0`,
		chromedp.WithPollingInterval(100*time.Millisecond)))
	cancelPrompt()
	b.shot("workspace-ready")

	// Type into the terminal as a user does: keystrokes into xterm's textarea, then Enter.
	b.do("type a command into the terminal", 10*time.Second, chromedp.Focus(chromedp.CSS(term+" .xterm-helper-textarea")),
		pressKeys("echo hi-from-browser\r"))
	// Its output: a row that is exactly the text (the prompt's row also holds the command).
	b.waitJS("the command's output in the terminal", `(() => {
		const rows = [...document.querySelectorAll('`+term+` .xterm-rows > div')].map(r => r.textContent.replace(/\u00a0/g, ' ').trim())
		return rows.some(l => l === 'hi-from-browser') && rows.join('\n').split('hi-from-browser').length - 1 >= 2
	})()`, 20*time.Second)
	b.shot("workspace-terminal")

	// A second shell in a new tab.
	b.do("open a second shell", 10*time.Second, clickOn("button[aria-label='New shell']"))
	b.waitJS("the second shell connected", `document.querySelectorAll('[data-testid=terminal]').length === 2 && (document.querySelector('`+term+`') || {}).dataset?.state === 'open' && (document.querySelector('`+term+`') || {}).dataset?.session !== (document.querySelector('[data-testid=terminal][data-active=false]') || {}).dataset?.session`, 30*time.Second)

	// The team's workspaces page lists it, connected (two terminals are open).
	b.do("open the team's workspaces", 10*time.Second, chromedp.Navigate(w.base+"/orgs/ml/workspaces"))
	card := `[data-workspace="` + id + `"]`
	b.waitJS("the workspace on the team's list", `(document.querySelector('`+card+`') || {}).dataset?.state === 'ready'`, 15*time.Second)
	if got := b.text(card); !strings.Contains(got, "trainer") || !strings.Contains(got, "main") || !strings.Contains(got, "build #") {
		t.Errorf("the workspace's card says %q", got)
	}
	b.shot("workspaces-list")

	// Stop it (confirmed): its endStages run and it ends; the ended are shown with the toggle.
	b.do("stop the workspace", 10*time.Second, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true; 0`),
		clickOn(card+" button.danger"))
	b.do("show the ended workspaces", 10*time.Second, clickOn("input[name=all]"))
	b.waitJS("the workspace stopped", `(document.querySelector('`+card+`') || {}).dataset?.state === 'stopped'`, 90*time.Second)
	b.shot("workspace-stopped")
}

// pressKeys types keys as a keyboard does: per key a keyDown that carries its text, then a
// keyUp (what Puppeteer's keyboard.press sends). Not chromedp.KeyEvent: its separate char event
// is a keypress that the page's preventDefault on keydown cannot stop, so xterm.js, which takes
// printable keys on keydown, would see every character twice.
func pressKeys(keys string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range keys {
			events := kb.Encode(r)
			text := ""
			for _, e := range events {
				if e.Type == kb.KeyChar {
					text = e.Text
				}
			}
			for _, e := range events {
				if e.Type == kb.KeyChar {
					continue
				}
				ev := *e
				if ev.Type == kb.KeyDown && text != "" {
					ev.Text, ev.UnmodifiedText = text, text
				}
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
