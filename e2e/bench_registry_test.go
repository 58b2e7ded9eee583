package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// BenchmarkRegistry1GiB pushes and pulls one 1 GiB blob with oras against Nimbus's registry
// and against the reference registry (CNCF distribution v3, filesystem storage) on the same
// machine in one run (one push each, then three pulls each in turns, compared by median), and
// reports each throughput, the ratio Nimbus/reference (target ≥ 1.0) and Nimbus's peak RSS
// (VmHWM of the server process) after the upload (target < 150 MiB).
// Both registries run on loopback with plain HTTP and their local-disk storage; Nimbus with
// SQLite and token auth (oras logs in through /v2/token), the reference without auth.
//
// It measures the same whatever b.N: run it with -benchtime=1x (make bench
// does). The figures are printed and reported as benchmark metrics.
func BenchmarkRegistry1GiB(b *testing.B) {
	oras := testenv.Oras(b)
	reference := testenv.ReferenceRegistry(b)
	size := int64(1 << 30)
	if s := os.Getenv("NIMBUS_BENCH_BLOB_MIB"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("NIMBUS_BENCH_BLOB_MIB=%q", s)
		}
		size = n << 20
	}
	blob := filepath.Join(b.TempDir(), "blob.bin")
	writeRandomFile(b, blob, size)

	nimbus := startBenchNimbus(b)
	ref := startReferenceRegistry(b, reference)
	for range b.N {
		b.StopTimer()
		n := orasCLI{b: b, bin: oras, home: b.TempDir(), host: nimbus.host, auth: []string{"-u", "bench", "-p", nimbus.token}}
		r := orasCLI{b: b, bin: oras, home: b.TempDir(), host: ref}
		nPush := n.push("bench/models/blob", blob)
		peak := vmHWM(b, nimbus.server.cmd.Process.Pid)
		rPush := r.push("bench/blob", blob)
		// A single 1 GiB pull swung by 2-3x from run to run on this machine (page cache, disk);
		// pulls are cheap to repeat, so each registry pulls three times, in turns so both see
		// the same moods of the host, and the medians are compared.
		var nPulls, rPulls []time.Duration
		for range 3 {
			nPulls = append(nPulls, n.pull("bench/models/blob", blob))
			rPulls = append(rPulls, r.pull("bench/blob", blob))
		}
		nPull, rPull := median(nPulls), median(rPulls)
		mib := float64(size) / (1 << 20)
		rate := func(d time.Duration) float64 { return mib / d.Seconds() }
		b.ReportMetric(rate(nPush), "nimbus-push-MiB/s")
		b.ReportMetric(rate(nPull), "nimbus-pull-MiB/s")
		b.ReportMetric(rate(rPush), "ref-push-MiB/s")
		b.ReportMetric(rate(rPull), "ref-pull-MiB/s")
		b.ReportMetric(rPush.Seconds()/nPush.Seconds(), "push-ratio")
		b.ReportMetric(rPull.Seconds()/nPull.Seconds(), "pull-ratio")
		b.ReportMetric(float64(peak)/(1<<20), "nimbus-peak-RSS-MiB")
		fmt.Printf("registry %.0f MiB blob with oras: push nimbus %.0f MiB/s, reference %.0f MiB/s (ratio %.2f); "+
			"pull nimbus %.0f MiB/s, reference %.0f MiB/s (ratio %.2f); nimbus peak RSS %.1f MiB (target < 150)\n",
			mib, rate(nPush), rate(rPush), rPush.Seconds()/nPush.Seconds(), rate(nPull), rate(rPull),
			rPull.Seconds()/nPull.Seconds(), float64(peak)/(1<<20))
		fmt.Printf("registry pulls (s): nimbus %s, reference %s\n", seconds(nPulls), seconds(rPulls))
	}
}

// benchNimbus is a nimbus-server with team bench, repo models and a registry token.
type benchNimbus struct {
	host, token string
	server      *proc
}

func startBenchNimbus(b *testing.B) benchNimbus {
	b.Helper()
	dir := b.TempDir()
	addr := freeAddr(b)
	srv := start(b, dir, []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_BUILTIN_AGENT=false", "NIMBUS_LOG_LEVEL=warn"}, "nimbus-server")
	waitReady(b, "http://"+addr, srv, 30*time.Second)
	owner := newClient(b, "http://"+addr)
	owner.signup("bench")
	owner.createOrg("bench")
	owner.createRepo("bench", apiclient.NewRepo{Name: "models"})
	tok := owner.newToken("bench", "registry:write")
	return benchNimbus{host: addr, token: tok, server: srv}
}

// startReferenceRegistry starts distribution's registry on loopback with filesystem storage
// and returns its host:port.
func startReferenceRegistry(b *testing.B, bin string) string {
	b.Helper()
	dir := b.TempDir()
	addr := freeAddr(b)
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	// No telemetry exporters: nothing may leave the machine, and nothing should be tried.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none",
		"OTEL_LOGS_EXPORTER=none", "OTEL_SDK_DISABLED=true"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if b.Failed() {
			b.Logf("reference registry output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the reference registry did not answer: %s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// orasCLI runs oras against one plain-HTTP registry.
type orasCLI struct {
	b         *testing.B
	bin, home string
	host      string
	auth      []string
}

func (o orasCLI) run(dir string, args ...string) time.Duration {
	o.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.bin, append(append(args, "--plain-http"), o.auth...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + o.home}
	// Write back what the previous step left dirty (a GiB pushed or pulled), so that no step pays
	// for the one before it.
	syscall.Sync()
	begin := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		o.b.Fatalf("oras %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return time.Since(begin)
}

// push uploads the file as a one-layer artifact to host/name:bench and returns how long it took.
func (o orasCLI) push(name, file string) time.Duration {
	return o.run(filepath.Dir(file), "push", o.host+"/"+name+":bench", filepath.Base(file)+":application/octet-stream")
}

// pull downloads host/name:bench into a fresh directory, checks the file's size, removes it (a
// GiB each) and returns how long the download took.
func (o orasCLI) pull(name, file string) time.Duration {
	out, err := os.MkdirTemp(o.home, "pull")
	if err != nil {
		o.b.Fatal(err)
	}
	defer os.RemoveAll(out)
	d := o.run(out, "pull", "-o", out, o.host+"/"+name+":bench")
	if fi, err := os.Stat(filepath.Join(out, filepath.Base(file))); err != nil || fi.Size() != fileSize(o.b, file) {
		o.b.Fatalf("the pulled file: %v %v", fi, err)
	}
	return d
}

func seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatFloat(d.Seconds(), 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(b testing.TB, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/status")
	return 0
}

// writeRandomFile writes size pseudo-random (incompressible) bytes.
func writeRandomFile(b *testing.B, path string, size int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 4<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		chunk := buf[:min(int64(len(buf)), left)]
		rng.Read(chunk)
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
