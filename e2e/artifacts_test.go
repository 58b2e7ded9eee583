package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// Issue 7's model journey: a pipeline (the server's built-in agent with its defaults, as `make
// run` starts it, on Docker with the busybox image: nothing says which network its jobs get, and
// they must reach the loopback server all the same) makes a model and pushes it with its job
// token, using the nimbus CLI it finds in the repo; an inference-style client pulls it with a
// deploy token through a proxy that cuts the first connection mid-body, resumes, and checks the
// digest. Then bad input against the real server: path traversal, a wrong digest, an upload
// past the quota, a token without the scope, a deploy token, another team's repo — and the
// store holds exactly the model's two blobs afterwards.
func TestModelFromPipelineToInference(t *testing.T) {
	cli := bin("nimbus")
	if isDynamic(t, cli) {
		t.Fatalf("%s is dynamically linked: the busybox job cannot run it (make build builds it with CGO_ENABLED=0)", cli)
	}
	// The collector runs every second through all of it (a grace period of an hour keeps the
	// fresh blobs; what matters is that it runs beside the uploads).
	w := newWorld(t, "NIMBUS_STORAGE_QUOTA=16MiB", "NIMBUS_GC_INTERVAL=1s",
		"NIMBUS_BUILTIN_AGENT=true", "NIMBUS_AGENT_EXECUTOR=docker", "DOCKER_HOST="+testenv.DockerHost(t))
	raw, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.work, "nimbus"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	n := w.push(`head -c 8388608 /dev/urandom > model.bin && echo '{"dim":768}' > config.json && ./nimbus artifact push ml/trainer bert v1 model.bin config.json`)
	b := w.waitFor(n, 120*time.Second, "finished", func(b apiclient.Build) bool { return b.Status == "success" || b.Status == "failed" })
	if b.Status != "success" {
		t.Fatalf("the pipeline failed: %s", w.jobLog(b.Pipelines[0].Stages[0].Jobs[0].ID))
	}

	// The version says what produced it.
	v := w.alice.artifactVersion("ml", "trainer", "bert", "latest")
	if v.Version != "v1" || v.Build == nil || v.Build.Number != n || v.Build.Commit != b.Commit || len(v.Files) != 2 ||
		v.Files[1].Name != "model.bin" || v.Files[1].Size != 8<<20 {
		t.Fatalf("the published version %+v (build %+v), want build #%d at %s", v, v.Build, n, b.Commit)
	}
	model := v.Files[1].Digest

	// The inference service: a deploy token, and a connection that breaks after 3 MiB.
	dt := w.alice.deployToken("ml", "trainer", "inference")
	proxy := startCutProxy(t, strings.TrimPrefix(w.base, "http://"), 3<<20)
	dst := t.TempDir()
	pull := exec.Command(cli, "artifact", "pull", "--dir", dst, "ml/trainer", "bert", "latest", "model.bin")
	pull.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dst, "NIMBUS_SERVER=http://" + proxy.addr,
		"NIMBUS_TOKEN=" + dt.Token, "NIMBUS_ARTIFACT_RETRY_WAIT=100ms"}
	var stdout, stderr bytes.Buffer
	pull.Stdout, pull.Stderr = &stdout, &stderr
	if err := pull.Run(); err != nil {
		t.Fatalf("pull: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if proxy.cut.Load() != 1 || !strings.Contains(stderr.String(), "resuming") {
		t.Fatalf("the download was not cut and resumed (cuts %d):\n%s", proxy.cut.Load(), stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(dst, "model.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(got); "sha256:"+hex.EncodeToString(sum[:]) != model {
		t.Fatalf("the pulled model's digest is not %s", model)
	}
	t.Logf("pulled through a cut connection:\n%s", stderr.String())

	checkArtifactBadInput(t, w, dt.Token)
	blobs, others := storeFiles(t, filepath.Join(w.dir, "data", "artifacts"))
	if blobs != 2 || len(others) != 0 {
		t.Fatalf("the store holds %d blobs (want the model's 2) and %v", blobs, others)
	}
}

// checkArtifactBadInput sends uploads the server must refuse, each keeping nothing.
func checkArtifactBadInput(t *testing.T, w *world, deploy string) {
	t.Helper()
	readOnly := w.alice.newToken("ro", "registry:read")
	write := w.alice.newToken("rw", "registry:write")
	bob := newClient(t, w.base)
	bob.signup("bob")
	bob.createOrg("rival")
	bob.createRepo("rival", apiclient.NewRepo{Name: "vault"})
	bobs := bob.newToken("rw", "registry:write")

	small := []byte("weights")
	big := make([]byte, 12<<20)
	rand.Read(big)
	otherSum := sha256.Sum256([]byte("something else"))
	const base = "/api/v1/repos/ml/trainer/artifacts"
	for _, c := range []struct {
		name, token, path string
		body              []byte
		header            string
		want              int
	}{
		{"path traversal", write, base + "/bert/v2/%2e%2e", small, "", 400}, // the server's edge refuses ".." segments
		{"path traversal in the package", write, base + "/../v2/x", small, "", 400},
		{"a wrong digest", write, base + "/bert/v2/model.bin", small, hex.EncodeToString(otherSum[:]), 400},
		{"past the quota", write, base + "/bert/v2/big.bin", big, "", 413},
		{"a token without registry:write", readOnly, base + "/bert/v2/model.bin", small, "", 403},
		{"the deploy token", deploy, base + "/bert/v2/model.bin", small, "", 403},
		{"another team's repo", write, "/api/v1/repos/rival/vault/artifacts/bert/v2/model.bin", small, "", 404},
		{"into ours from another team", bobs, base + "/bert/v2/model.bin", small, "", 404},
	} {
		req, _ := http.NewRequest("PUT", w.base+c.path, bytes.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.header != "" {
			req.Header.Set("X-Checksum-Sha256", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	var bobSees struct{ Items []any }
	if st := bob.do("GET", base, nil, &bobSees); st != 404 {
		t.Errorf("another team lists our artifacts: %d", st)
	}
	if vers := w.alice.artifactVersions("ml", "trainer", "bert"); len(vers) != 1 {
		t.Errorf("refused uploads made versions: %+v", vers)
	}
}

// storeFiles counts the blobs under a local artifact store and lists any other file (upload
// sessions, temporary files).
func storeFiles(t *testing.T, root string) (int, []string) {
	t.Helper()
	blobs := 0
	var others []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, "blobs"+string(filepath.Separator)) {
			blobs++
		} else {
			others = append(others, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return blobs, others
}

// isDynamic reports whether the binary asks for a dynamic loader.
func isDynamic(t *testing.T, path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// cutProxy forwards TCP connections to a server; the first one is cut after `after` bytes of
// the server's answers (a flaky network between an inference service and the registry).
type cutProxy struct {
	addr   string
	target string
	after  int64
	cut    atomic.Int32
}

func startCutProxy(t *testing.T, target string, after int64) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &cutProxy{addr: ln.Addr().String(), target: target, after: after}
	var first atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, first.CompareAndSwap(false, true))
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn, cut bool) {
	defer c.Close()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	go io.Copy(s, c)
	if !cut {
		io.Copy(c, s)
		return
	}
	io.CopyN(c, s, p.after)
	p.cut.Add(1)
}
