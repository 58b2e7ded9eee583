package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
)

// Every job step gets the nimbus CLI (nimbus artifact push|pull, with the job's CNB_TOKEN), the
// way Buildkite's jobs get buildkite-agent: a job in any image hands files to the build's other
// pipelines without installing anything. It is mounted read-only at the end of the image's PATH,
// so an image's own nimbus wins.

// CLIOff, as Config.NimbusCLI, gives jobs no nimbus CLI.
const CLIOff = "off"

// findCLI finds the nimbus CLI for the jobs: the configured path, else nimbus beside the
// running executable (bin/ of a release holds all three binaries), else nimbus on PATH. It must
// be statically linked (make build makes it so). It returns "" and why when there is none.
func findCLI(configured string) (string, string) {
	if configured == CLIOff {
		return "", "turned off (NIMBUS_AGENT_NIMBUS_CLI=off)"
	}
	candidates := []string{configured}
	if configured == "" {
		candidates = nil
		if self, err := os.Executable(); err == nil {
			candidates = append(candidates, filepath.Join(filepath.Dir(self), "nimbus"))
		}
		if p, err := exec.LookPath("nimbus"); err == nil {
			candidates = append(candidates, p)
		}
	}
	var problems []string
	for _, c := range candidates {
		abs, err := filepath.Abs(c)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			if configured != "" || !os.IsNotExist(err) {
				problems = append(problems, fmt.Sprintf("%s: %v", c, err))
			}
			continue
		}
		static, err := executor.IsStatic(abs)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", c, err))
		case !static:
			problems = append(problems, c+" is dynamically linked (build it with CGO_ENABLED=0)")
		default:
			return abs, ""
		}
	}
	if len(problems) == 0 {
		return "", "no nimbus executable beside the agent or on PATH"
	}
	return "", strings.Join(problems, "; ")
}
