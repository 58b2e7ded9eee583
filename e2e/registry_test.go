package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// registryWorld is a nimbus-server with a team "conf" (owner "oci"), two private repos and a
// personal access token with registry:write.
type registryWorld struct {
	base   string // http://127.0.0.1:PORT
	host   string // 127.0.0.1:PORT, as registry clients name it
	owner  *client
	token  string
	server *proc
}

// startRegistryWorld starts the server with extra environment (the storage backend) and makes
// the team, its repos and the token.
func startRegistryWorld(t *testing.T, env ...string) *registryWorld {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	w := &registryWorld{base: "http://" + addr, host: addr}
	w.server = start(t, dir, append([]string{"NIMBUS_LISTEN=" + addr, "NIMBUS_BUILTIN_AGENT=false", "NIMBUS_LOG_LEVEL=warn"}, env...), "nimbus-server")
	waitReady(t, w.base, w.server, 30*time.Second)
	w.owner = newClient(t, w.base)
	w.owner.signup("oci")
	w.owner.createOrg("conf")
	for _, r := range []string{"repo-a", "repo-b"} {
		w.owner.createRepo("conf", apiclient.NewRepo{Name: r})
	}
	tok := w.owner.newToken("oci", "registry:write")
	w.token = tok
	return w
}

// s3Env is the server environment of the S3 backend against the test MinIO, in a bucket of
// its own.
func s3Env(t *testing.T, presign bool) []string {
	s3 := testenv.S3Server(t)
	return []string{"NIMBUS_STORAGE=s3", "NIMBUS_S3_ENDPOINT=http://" + s3.Endpoint,
		"NIMBUS_S3_BUCKET=" + s3.Bucket + "-" + strings.ToLower(strings.ReplaceAll(randomName(), "_", "")),
		"NIMBUS_S3_ACCESS_KEY=" + s3.AccessKey, "NIMBUS_S3_SECRET_KEY=" + s3.SecretKey,
		fmt.Sprintf("NIMBUS_S3_PRESIGN=%t", presign)}
}

func randomName() string { return fmt.Sprintf("%x", time.Now().UnixNano()) }

// junit is what we read of the conformance suite's junit.xml.
type junit struct {
	Suites []struct {
		Tests int `xml:"tests,attr"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Data    string `xml:",cdata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Data    string `xml:",cdata"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// runConformance runs the official OCI distribution-spec conformance suite against the world
// with every test enabled (the "dev" profile: upload cancel, digest headers, tag parameters;
// plus sparse manifests, sha512 and subjects/referrers) and fails on any failed, erroneous or
// skipped test, printing each.
func runConformance(t *testing.T, w *registryWorld) {
	t.Helper()
	bin := testenv.OCIConformance(t)
	results := t.TempDir()
	// About two minutes on an idle CI machine; the margin is for one sharing its two cores with
	// the rest of the e2e suite (a 5-minute limit once killed the S3 run mid-suite).
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = results
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + results,
		"OCI_REGISTRY=" + w.host, "OCI_TLS=disabled", "OCI_VERSION=dev",
		// {org}/{repo}/{name} and {org}/{repo}: both shapes, and mounts between two repos.
		"OCI_REPO1=conf/repo-a/app", "OCI_REPO2=conf/repo-b",
		"OCI_USERNAME=oci", "OCI_PASSWORD=" + w.token, "OCI_RESULTS_DIR=" + results,
		"OCI_TEST_PULL=1", "OCI_TEST_PUSH=1", "OCI_TEST_CONTENT_DISCOVERY=1", "OCI_TEST_CONTENT_MANAGEMENT=1",
		"OCI_DATA_SPARSE=true", "OCI_DATA_SHA512=true", "OCI_DATA_SUBJECT=true", "OCI_DATA_SUBJECT_MISSING=true",
		"OCI_API_REFERRER=true", "OCI_API_BLOBS_UPLOAD_CANCEL=true", "OCI_API_BLOBS_MOUNT_ANONYMOUS=true",
		"OCI_API_BLOBS_DIGEST_HEADER=true", "OCI_API_MANIFESTS_DIGEST_HEADER=true", "OCI_API_MANIFESTS_TAG_PARAM=true",
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	runErr := cmd.Run()
	raw, err := os.ReadFile(filepath.Join(results, "junit.xml"))
	if err != nil {
		t.Fatalf("conformance suite wrote no junit.xml (%v): %v\n%s", runErr, err, tail(out.String(), 4000))
	}
	var j junit
	if err := xml.Unmarshal(raw, &j); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	var tests, failed, skipped int
	for _, s := range j.Suites {
		tests += s.Tests
		for _, c := range s.Cases {
			switch {
			case c.Failure != nil:
				failed++
				t.Errorf("FAILED %s: %s\n%s", c.Name, c.Failure.Message, tail(c.Failure.Data, 3000))
			case c.Error != nil:
				failed++
				t.Errorf("ERROR %s: %s\n%s", c.Name, c.Error.Message, tail(c.Error.Data, 3000))
			case c.Skipped != nil:
				skipped++
				t.Errorf("SKIPPED %s: %s", c.Name, c.Skipped.Message)
			}
		}
	}
	if os.Getenv("NIMBUS_TEST_KEEP_CONFORMANCE") != "" {
		os.CopyFS(os.Getenv("NIMBUS_TEST_KEEP_CONFORMANCE")+"/"+t.Name(), os.DirFS(results))
		os.WriteFile(os.Getenv("NIMBUS_TEST_KEEP_CONFORMANCE")+"/"+t.Name()+"/stdout.txt", out.Bytes(), 0o644)
	}
	t.Logf("OCI conformance: %d tests, %d failed, %d skipped in %v", tests, failed, skipped, time.Since(begin).Round(time.Millisecond))
	if tests < 500 {
		t.Errorf("only %d conformance tests ran:\n%s\n%s", tests, tail(string(raw), 3000), tail(out.String(), 3000))
	}
	if runErr != nil && failed == 0 {
		t.Errorf("conformance suite: %v\n%s", runErr, tail(out.String(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// The official conformance suite, every test enabled, on the local disk with SQLite.
func TestRegistryConformanceLocal(t *testing.T) {
	t.Parallel()
	runConformance(t, startRegistryWorld(t))
}

// The same on S3 (MinIO) with PostgreSQL and Redis.
func TestRegistryConformanceS3(t *testing.T) {
	t.Parallel()
	env := append(s3Env(t, false), "NIMBUS_DATABASE_URL="+storetest.PostgresURL(t), "NIMBUS_REDIS_URL="+redisDB(t))
	runConformance(t, startRegistryWorld(t, env...))
}

// run runs a client command with env and fails the test on error; it returns the output.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// oras pushes a model file and an attached signature, then pulls both back and lists the
// referrers, as a pipeline and an inference service would.
func orasRoundTrip(t *testing.T, w *registryWorld, repo string) {
	t.Helper()
	oras := testenv.Oras(t)
	home := t.TempDir()
	env := []string{"HOME=" + home, "DOCKER_CONFIG=" + filepath.Join(home, ".docker")}
	model := bytes.Repeat([]byte("weights-"), 3<<17) // 3 MiB
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "model.bin"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := w.host + "/" + repo + ":v1"
	run(t, env, oras, "login", "--plain-http", "-u", "oci", "-p", w.token, w.host)
	pushEnv := append(env, "PWD="+src)
	cmd := exec.Command(oras, "push", "--plain-http", "--artifact-type", "application/vnd.nimbus.model", ref, "model.bin:application/octet-stream")
	cmd.Dir, cmd.Env = src, append([]string{"PATH=" + os.Getenv("PATH")}, pushEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oras push: %v\n%s", err, out)
	}
	cmd = exec.Command(oras, "attach", "--plain-http", "--artifact-type", "application/vnd.nimbus.signature", ref, "model.bin:application/vnd.nimbus.sig")
	cmd.Dir, cmd.Env = src, append([]string{"PATH=" + os.Getenv("PATH")}, pushEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oras attach: %v\n%s", err, out)
	}
	dst := t.TempDir()
	run(t, env, oras, "pull", "--plain-http", "-o", dst, ref)
	got, err := os.ReadFile(filepath.Join(dst, "model.bin"))
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("oras pull: %d bytes, %v", len(got), err)
	}
	if out := run(t, env, oras, "discover", "--plain-http", "--format", "json", ref); !strings.Contains(out, "application/vnd.nimbus.signature") {
		t.Fatalf("oras discover lacks the attached signature:\n%s", out)
	}
	if out := run(t, env, oras, "repo", "tags", "--plain-http", w.host+"/"+repo); strings.TrimSpace(out) != "v1" {
		t.Fatalf("oras repo tags: %q", out)
	}
}

// docker pushes the busybox test image through the Docker engine of e2e/testenv.sh (loopback
// registries are insecure-allowed by default), removes it and pulls it back; then the repo goes
// public and an anonymous engine pulls it.
func dockerRoundTrip(t *testing.T, w *registryWorld, repo string) {
	t.Helper()
	host, image := testenv.DockerHost(t), testenv.Image(t)
	cfg := t.TempDir()
	env := []string{"DOCKER_HOST=" + host, "DOCKER_CONFIG=" + cfg, "HOME=" + cfg}
	ref := w.host + "/" + repo + ":v1"
	run(t, env, "docker", "tag", image, ref)
	t.Cleanup(func() { exec.Command("docker", "-H", host, "rmi", "-f", ref).Run() })
	cmd := exec.Command("docker", "login", "-u", "oci", "--password-stdin", w.host)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(w.token)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker login: %v\n%s", err, out)
	}
	run(t, env, "docker", "push", ref)
	run(t, env, "docker", "rmi", ref)
	run(t, env, "docker", "pull", ref)
	if out := run(t, env, "docker", "run", "--rm", "--network", "none", ref, "echo", "pulled back"); !strings.Contains(out, "pulled back") {
		t.Fatalf("docker run of the pulled image: %q", out)
	}
	// Anonymous: a private repo asks for credentials, a public one is pulled without.
	run(t, env, "docker", "logout", w.host)
	run(t, env, "docker", "rmi", ref)
	cmd = exec.Command("docker", "pull", ref)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(strings.ToLower(string(out)), "unauthorized") &&
		!strings.Contains(strings.ToLower(string(out)), "authentication required") {
		t.Fatalf("anonymous pull of a private repo: %v\n%s", err, out)
	}
	org, name, _ := strings.Cut(repo, "/")
	name, _, _ = strings.Cut(name, "/")
	w.owner.must(200, "PATCH", "/api/v1/repos/"+org+"/"+name, map[string]string{"visibility": "public"}, nil)
	run(t, env, "docker", "pull", ref)
}

// oras and Docker round-trip through the registry on the local disk.
func TestRegistryClientsRoundTrip(t *testing.T) {
	t.Parallel()
	w := startRegistryWorld(t)
	t.Run("oras", func(t *testing.T) { orasRoundTrip(t, w, "conf/repo-a/model") })
	t.Run("docker", func(t *testing.T) { dockerRoundTrip(t, w, "conf/repo-b") })
}

// With NIMBUS_S3_PRESIGN, downloads are redirects to MinIO, which clients follow.
func TestRegistryS3PresignedDownloads(t *testing.T) {
	t.Parallel()
	env := s3Env(t, true)
	w := startRegistryWorld(t, env...)
	t.Run("oras", func(t *testing.T) {
		orasRoundTrip(t, w, "conf/repo-a")
		// The blob GET itself is the redirect (HTTP Basic with the token, straight to /v2).
		req, _ := http.NewRequest("GET", w.base+"/v2/conf/repo-a/manifests/v1", nil)
		req.SetBasicAuth("oci", w.token)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		var man struct {
			Layers []struct{ Digest string } `json:"layers"`
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&man)
		resp.Body.Close()
		if len(man.Layers) != 1 {
			t.Fatalf("manifest: %d %+v", resp.StatusCode, man)
		}
		req, _ = http.NewRequest("GET", w.base+"/v2/conf/repo-a/blobs/"+man.Layers[0].Digest, nil)
		req.SetBasicAuth("oci", w.token)
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err = noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, "http://"+testenv.S3Server(t).Endpoint+"/") ||
			!strings.Contains(loc, "X-Amz-Signature=") {
			t.Fatalf("blob GET: %d Location %q", resp.StatusCode, loc)
		}
	})
	t.Run("docker", func(t *testing.T) { dockerRoundTrip(t, w, "conf/repo-b/img") })
}
