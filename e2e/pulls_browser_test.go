package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// pullBrowserCI: main's push and a pull request's check both train and report the metrics of
// loss.txt and accuracy.txt, so the request's page can show what the change did to the model.
const pullBrowserCI = `main:
  push:
    - name: train
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: train
          script: echo "##[set-output metric.loss=$(cat loss.txt)]" && echo "##[set-output metric.accuracy=$(cat accuracy.txt)]"
  pull_request:
    - name: eval
      runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: IMAGE }
      stages:
        - name: eval
          script: echo "##[set-output metric.loss=$(cat loss.txt)]" && echo "##[set-output metric.accuracy=$(cat accuracy.txt)]"
`

// A pull request in a real Chromium: alice opens one from her branch's row on the branches page,
// sees its diff and leaves a comment on a line of it; bob, a second developer, approves it;
// the page shows the model's effect (the request lowers the loss and raises the accuracy, both
// better), and alice merges. Screenshots go to e2e/screenshots.
func TestPullRequestInChromium(t *testing.T) {
	w := newWorld(t)
	w.agent("", "NIMBUS_AGENT_NETWORK=none")
	b := startBrowser(t, w.base, 90)
	w.waitBuildSuccess(w.pushFiles(map[string]string{".cnb.yml": strings.ReplaceAll(pullBrowserCI, "IMAGE", w.image),
		"loss.txt": "0.40\n", "accuracy.txt": "0.80\n", "train.py": "lr = 0.1\nepochs = 10\n"}), 2*time.Minute)
	gitRun(t, w.work, "checkout", "-q", "-b", "tune")
	w.pushFilesTo("tune", map[string]string{"loss.txt": "0.30\n", "accuracy.txt": "0.85\n", "train.py": "lr = 0.01\nepochs = 10\n"})

	// bob joins as a developer, so he may approve.
	var invite struct {
		Link string `json:"link"`
	}
	w.alice.must(http.StatusCreated, http.MethodPost, "/api/v1/orgs/ml/invitations", map[string]string{"email": "bob@example.com", "role": "developer"}, &invite)
	_, secret, _ := strings.Cut(invite.Link, "token=")
	bob := newClient(t, w.base)
	bob.signup("bob")
	bob.must(http.StatusNoContent, http.MethodPost, "/api/v1/invitations/accept", map[string]string{"token": secret}, nil)

	signIn := func(who string) {
		if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatalf("sign out: %v", err)
		}
		b.do("sign in as "+who, 20*time.Second, chromedp.Navigate(w.base+"/login"),
			chromedp.WaitVisible(chromedp.CSS("input[name=login]")), typeInto("input[name=login]", who),
			typeInto("input[name=password]", "a long enough passphrase"), clickOn("button[type=submit]"))
		b.waitJS("signed in as "+who, `location.pathname !== '/login'`, 10*time.Second)
	}
	signIn("alice")

	// Open the request from the branch page: the form comes filled with the branch.
	b.do("open the branches page", 20*time.Second, chromedp.Navigate(w.base+"/ml/trainer/-/branches"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-ref="tune"] a`)))
	b.shot("branches")
	b.do("open a pull request from tune", 10*time.Second, clickOn(`tr[data-ref="tune"] a[href$="new=tune"]`),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Open a pull request"] input`)))
	b.waitJS("the branch in the form", `[...document.querySelectorAll('form[aria-label="Open a pull request"] select')][0].value === 'tune'`, 10*time.Second)
	b.do("name the request", 10*time.Second, typeInto(`form[aria-label="Open a pull request"] input`, "Lower the learning rate"))
	b.shot("pull-open")
	b.do("open it", 10*time.Second, clickOn(`form[aria-label="Open a pull request"] button[type=submit]`))
	b.waitJS("the request's page", `location.pathname === '/ml/trainer/-/pulls/1' && document.body.innerText.includes('Lower the learning rate')`, 10*time.Second)

	// The model's effect, once the eval pipeline has reported: both metrics better.
	b.waitJS("the metric deltas", `!!document.querySelector('tr[data-metric="loss"][data-verdict="better"]') && !!document.querySelector('tr[data-metric="accuracy"][data-verdict="better"]')`, 2*time.Minute)
	if got := b.text(`tr[data-metric="loss"]`); !strings.Contains(got, "0.4") || !strings.Contains(got, "0.3") || !strings.Contains(got, "−0.1") {
		t.Errorf("the loss row: %q", got)
	}
	if got := b.text(`tr[data-metric="accuracy"]`); !strings.Contains(got, "+0.05") {
		t.Errorf("the accuracy row: %q", got)
	}
	// The checks: the eval pipeline, with its duration and what it cost.
	b.waitJS("the checks with their cost", `!!document.querySelector('table[aria-label="Checks"]') && document.querySelector('table[aria-label="Checks"]').innerText.includes('eval') && /\d\.\d\d/.test(document.querySelector('table[aria-label="Checks"]').innerText)`, 15*time.Second)
	b.shot("pull-metrics")

	// The diff, and a comment on line 1 of train.py.
	b.waitJS("the diff of train.py", pressOnce("body", "Files changed", `!!document.querySelector('section[aria-label="Changes to train.py"] tr.add')`), 10*time.Second)
	if got := b.text(`section[aria-label="Changes to train.py"] tr.add`); !strings.Contains(got, "lr = 0.01") {
		t.Errorf("the added line: %q", got)
	}
	b.do("comment on line 1", 10*time.Second, clickOn(`section[aria-label="Changes to train.py"] button[aria-label="Comment on line 1"]`),
		chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Comment on line 1"] textarea`)),
		typeInto(`form[aria-label="Comment on line 1"] textarea`, "Why 0.01?"), clickOn(`form[aria-label="Comment on line 1"] button[type=submit]`))
	b.waitJS("the line comment", `[...document.querySelectorAll('.linecomments li')].some((li) => li.innerText.includes('Why 0.01?'))`, 10*time.Second)
	b.shot("pull-line-comment")
	comments, err := w.api.api.PullComments(t.Context(), "ml", "trainer", 1)
	w.api.check("comments", err)
	if len(comments) != 1 || comments[0].Path != "train.py" || comments[0].Line != 1 || comments[0].Author != "alice" {
		t.Fatalf("comments %+v", comments)
	}

	// bob approves.
	signIn("bob")
	b.do("open the request as bob", 20*time.Second, chromedp.Navigate(w.base+"/ml/trainer/-/pulls/1"), chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Reviews"]`)))
	b.waitJS("bob's approval", pressOnce(`section[aria-label="Reviews"]`, "Approve",
		`document.querySelector('section[aria-label="Reviews"]').innerText.includes('bob approved')`), 10*time.Second)
	b.shot("pull-approved")

	// alice merges.
	signIn("alice")
	b.do("open the request as alice", 20*time.Second, chromedp.Navigate(w.base+"/ml/trainer/-/pulls/1"), chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Merge"]`)))
	b.waitJS("merged", pressOnce(`section[aria-label="Merge"]`, "Merge", `document.body.innerText.includes('Merged by alice')`), 15*time.Second)
	b.shot("pull-merged")
	pr, err := w.api.api.GetPull(t.Context(), "ml", "trainer", 1)
	w.api.check("the merged request", err)
	if pr.State != "merged" || len(pr.ApprovedBy) != 1 || pr.ApprovedBy[0] != "bob" {
		t.Fatalf("after the merge %+v", pr)
	}
}
