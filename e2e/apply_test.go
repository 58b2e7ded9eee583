package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// cnb:apply with sync waits for the build it starts in the same repo and carries its result and
// its last job's exports; cnb:trigger starts a build of another repo with a token; parent and
// children link to each other.
func TestPipelinesStartPipelines(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.alice.createRepo("ml", apiclient.NewRepo{Name: "other"})
	other := t.TempDir()
	gitRun(t, other, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(other, ".cnb.yml"), []byte(`main:
  api_trigger_deploy:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: `+w.image+` }
      stages:
        - name: deploy
          script: echo "deploying for $API_TRIGGER_REPO_SLUG at $API_TRIGGER_COMMIT_SHORT, $TARGET"
`), 0o644)
	gitRun(t, other, "add", ".")
	gitRun(t, other, "commit", "-q", "-m", "deploy pipeline")
	gitRun(t, other, "push", "-q", strings.Replace(w.base, "http://", "http://alice:"+w.token+"@", 1)+"/ml/other.git", "main")

	cnb := `main:
  push:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      stages:
        - name: apply
          type: cnb:apply
          options: { event: api_trigger_child, sync: true, env: { EPOCHS: "3" } }
          exports: { buildSuccess: CHILD_OK, lastJobExports: CHILD_EXPORTS, sn: CHILD_SN }
        - name: trigger
          type: cnb:trigger
          options: { slug: ml/other, token: ` + w.token + `, event: api_trigger_deploy, env: { TARGET: staging } }
        - name: after
          script: echo "child=$CHILD_OK sn=$CHILD_SN exports=$CHILD_EXPORTS"
  api_trigger_child:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      stages:
        - name: work
          script:
            - echo "##[set-output answer=42]"
            - echo "origin=$APPLY_TRIGGER_ORIGIN_EVENT by=$APPLY_TRIGGER_USER epochs=$EPOCHS"
          exports: { answer: ANSWER }
`
	n := w.pushFiles(map[string]string{".cnb.yml": cnb})
	parent := w.waitBuildSuccess(n, 2*time.Minute)
	after := w.jobLog(parent.Pipelines[0].Stages[2].Jobs[0].ID)
	if !strings.Contains(after, `child=true sn=ml/trainer#2 exports={"ANSWER":"42"}`) {
		t.Errorf("the parent did not carry its child's result:\n%s", after)
	}
	if strings.Contains(w.jobLog(parent.Pipelines[0].Stages[1].Jobs[0].ID), w.token) {
		t.Error("cnb:trigger's token shows in its log")
	}
	child := w.waitBuildSuccess(2, time.Minute)
	if log := w.jobLog(child.Pipelines[0].Stages[0].Jobs[0].ID); !strings.Contains(log, "origin=push by=alice epochs=3") {
		t.Errorf("the child's env:\n%s", log)
	}
	if links := w.build(2); links.Parent == nil || links.Parent.Repo != "ml/trainer" || links.Parent.Number != n {
		t.Errorf("the child's parent: %+v", links.Parent)
	}
	if links := w.build(n); len(links.Children) != 2 || links.Children[0].Repo != "ml/trainer" || links.Children[1].Repo != "ml/other" || links.Children[1].Number != 1 {
		t.Errorf("the parent's children: %+v", links.Children)
	}
	var deployed apiclient.Build
	deadline := time.Now().Add(time.Minute)
	for {
		deployed = w.api.build("ml", "other", 1)
		if deployed.Status == "success" || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if log := w.jobLog(deployed.Pipelines[0].Stages[0].Jobs[0].ID); deployed.Status != "success" || !strings.Contains(log, "deploying for ml/trainer at ") ||
		!strings.Contains(log, ", staging") {
		t.Errorf("the other repo's build %s:\n%s", deployed.Status, log)
	}
}
