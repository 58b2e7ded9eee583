package e2e

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// docker.volumes end to end (issue 14): a real server, a real nimbus-agent with the Docker
// executor and a small cache budget, pushes with the real git client. The pushes build on each
// other, so the whole story runs in six pushes:
//
//  1. a copy-on-write cache written by a successful pipeline …
//  2. … is visible to the next one, which fails after writing more;
//  3. two concurrent writers and a read-only reader: none sees the failed run's write or
//     another's files, and the reader cannot write;
//  4. the cache is exactly one writer's whole set; a 3 MiB cache is filled;
//  5. a second 3 MiB cache takes the host over its 4 MiB budget: the least recently used go;
//  6. the evicted cache is empty, the kept one full, and the host's caches are within budget.
func TestVolumeCachesAcrossPipelines(t *testing.T) {
	w := newWorld(t)
	const budget = 4 << 20
	_, dir := w.agent("", "NIMBUS_AGENT_CACHE_BUDGET=4MiB")

	b := volumeRun(t, w, "success", volumePipeline(w, "seed", `"/cache"`, `echo run1 > /cache/a`))
	if log := w.jobLog(jobOf(t, b, "seed")); !strings.Contains(log, "cache /cache (copy-on-write): empty (first use)") {
		t.Fatalf("seed log: %q", log)
	}

	b = volumeRun(t, w, "failed", volumePipeline(w, "fail", `"/cache"`, `cat /cache/a; echo leaked > /cache/b; exit 1`))
	if log := w.jobLog(jobOf(t, b, "fail")); !strings.Contains(log, "run1") || !strings.Contains(log, "restored") {
		t.Fatalf("the failing run did not see the first run's cache: %q", log)
	}

	writer := func(mark string) string {
		return `echo "start $(cut -d' ' -f1 /proc/uptime)"; cat /cache/a; test ! -e /cache/b || echo LEAKED
i=0; while [ $i -lt 20 ]; do echo ` + mark + ` > /cache/f$i; i=$((i+1)); sleep 0.1; done
for f in /cache/f*; do [ "$(cat $f)" = ` + mark + ` ] || echo "MIXED $f"; done
echo "end $(cut -d' ' -f1 /proc/uptime)"`
	}
	reader := `echo "start $(cut -d' ' -f1 /proc/uptime)"; i=0
while [ $i -lt 20 ]; do test -e /cache/f0 && echo SAW-A-WRITER; i=$((i+1)); sleep 0.1; done
cat /cache/a; if touch /cache/x 2>/dev/null; then echo WROTE; else echo ro-refused; fi
echo "end $(cut -d' ' -f1 /proc/uptime)"`
	b = volumeRun(t, w, "success", volumePipeline(w, "writer-a", `"/cache"`, writer("A"))+
		volumePipeline(w, "writer-b", `"/cache:cow"`, writer("B"))+volumePipeline(w, "reader", `"/cache:ro"`, reader))
	logs := map[string]string{}
	for _, name := range []string{"writer-a", "writer-b", "reader"} {
		logs[name] = w.jobLog(jobOf(t, b, name))
		for _, bad := range []string{"LEAKED", "MIXED", "SAW-A-WRITER", "WROTE"} {
			if strings.Contains(logs[name], bad) {
				t.Fatalf("%s: %s:\n%s", name, bad, logs[name])
			}
		}
		if !strings.Contains(logs[name], "run1") {
			t.Fatalf("%s did not see the cache: %q", name, logs[name])
		}
	}
	if !strings.Contains(logs["reader"], "ro-refused") {
		t.Fatalf("reader: %q", logs["reader"])
	}
	sa, sb := parseSpan(t, logs["writer-a"]), parseSpan(t, logs["writer-b"])
	if sa.start >= sb.end || sb.start >= sa.end {
		t.Fatalf("the writers did not run concurrently: %+v %+v", sa, sb)
	}

	b = volumeRun(t, w, "success", volumePipeline(w, "verify", `"/cache", "/big1"`,
		`echo "files=$(ls /cache | grep -c '^f') marks=$(cat /cache/f* | sort -u | tr '\n' ' ')"
dd if=/dev/urandom of=/big1/blob bs=64k count=48 2>/dev/null`))
	log := w.jobLog(jobOf(t, b, "verify"))
	if !strings.Contains(log, "files=20 marks=A \n") && !strings.Contains(log, "files=20 marks=B \n") {
		t.Fatalf("the cache after two concurrent writers is not one writer's whole set: %q", log)
	}

	volumeRun(t, w, "success", volumePipeline(w, "fill", `"/big2"`, `dd if=/dev/urandom of=/big2/blob bs=64k count=48 2>/dev/null`))
	b = volumeRun(t, w, "success", volumePipeline(w, "after-eviction", `"/big1:ro", "/big2:ro"`,
		`test -e /big1/blob && echo big1-kept; test -f /big2/blob && echo big2-kept; true`))
	log = w.jobLog(jobOf(t, b, "after-eviction"))
	if strings.Contains(log, "big1-kept") || !strings.Contains(log, "big2-kept") {
		t.Fatalf("eviction: want big1 (least recently used) gone and big2 kept: %q", log)
	}
	if used := diskBytes(t, filepath.Join(dir, "caches")); used > budget+64<<10 { // metadata and directories
		t.Fatalf("the host's caches take %d bytes, over the %d budget", used, budget)
	}
}

// volumePipeline is one pipeline of a .cnb.yml's main.push list: one job running script with
// the given docker.volumes (a YAML flow list's content).
func volumePipeline(w *world, name, vols, script string) string {
	var sb strings.Builder
	sb.WriteString("    - name: " + name + "\n      runner: { tags: cnb:arch:amd64, cpus: 1 }\n")
	sb.WriteString("      docker: { image: " + w.image + ", volumes: [" + vols + "] }\n")
	sb.WriteString("      stages:\n        - name: only\n          script: |\n")
	for _, line := range strings.Split(script, "\n") {
		sb.WriteString("            " + line + "\n")
	}
	return sb.String()
}

// volumeRun pushes a .cnb.yml of the given pipelines and waits for the build to end with want.
func volumeRun(t testing.TB, w *world, want, pipelines string) apiclient.Build {
	t.Helper()
	w.pushes++
	os.WriteFile(filepath.Join(w.work, ".cnb.yml"), []byte("main:\n  push:\n"+pipelines), 0o644)
	gitRun(t, w.work, "add", ".")
	gitRun(t, w.work, "commit", "-q", "--allow-empty", "-m", "volumes")
	u, _ := url.Parse(w.base + "/ml/trainer.git")
	u.User = url.UserPassword("alice", w.token)
	gitRun(t, w.work, "push", "-q", u.String(), "main")
	n := int64(w.pushes)
	b := w.waitFor(n, 90*time.Second, "the end", func(b apiclient.Build) bool {
		return len(b.Pipelines) > 0 && b.Status != "queued" && b.Status != "running"
	})
	if b.Status != want {
		var reasons []string
		for _, p := range b.Pipelines {
			reasons = append(reasons, p.Name+": "+p.Status+" "+p.Reason)
			for _, st := range p.Stages {
				for _, j := range st.Jobs {
					reasons = append(reasons, w.jobLog(j.ID))
				}
			}
		}
		t.Fatalf("build #%d %s, want %s:\n%s", n, b.Status, want, strings.Join(reasons, "\n"))
	}
	return b
}

// jobOf is the id of the one job of the named pipeline.
func jobOf(t testing.TB, b apiclient.Build, pipeline string) int64 {
	t.Helper()
	for _, p := range b.Pipelines {
		if p.Name == pipeline && len(p.Stages) > 0 && len(p.Stages[0].Jobs) > 0 {
			return p.Stages[0].Jobs[0].ID
		}
	}
	t.Fatalf("no pipeline %q in %+v", pipeline, b)
	return 0
}

// diskBytes is the space a directory tree takes, each inode once.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
