package runner

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Result keys of a script job that `exports` may name.
const (
	ResultCode   = "code"
	ResultStdout = "stdout"
	ResultStderr = "stderr"
	ResultInfo   = "info"    // stdout and stderr interleaved
	ResultSkip   = "skip"    // why a job with conditions was skipped; "" when it ran
	maxValue     = 100 << 10 // an exported value of this size or more is ignored, as in CNB
	maxLine      = 2 * maxValue
	setOutputTag = "##[set-output "
)

// results collects what a job's exports can name: its streams (only those some export asks for,
// each up to maxValue) and the `##[set-output key=value]` lines of its stdout. It is safe for the
// concurrent stdout and stderr writers of an executor.
type results struct {
	mu                   sync.Mutex
	want                 map[string]bool
	stdout, stderr, info capped
	line                 []byte // the unfinished stdout line
	lineTooLong          bool
	outputs              map[string]string
}

// capped keeps at most maxValue+1 bytes: enough to know that a value is too big.
type capped struct{ b []byte }

func (c *capped) write(p []byte) {
	if room := maxValue + 1 - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(len(p), room)]...)
	}
}

func newResults(exports map[string]string) *results {
	r := &results{want: map[string]bool{}, outputs: map[string]string{}}
	for key := range exports {
		r.want[key] = true
	}
	return r
}

// writer returns the io.Writer for one stream of the job.
func (r *results) writer(stderr bool) *resultWriter { return &resultWriter{r: r, stderr: stderr} }

type resultWriter struct {
	r      *results
	stderr bool
}

func (w *resultWriter) Write(p []byte) (int, error) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.want[ResultInfo] {
		r.info.write(p)
	}
	if w.stderr {
		if r.want[ResultStderr] {
			r.stderr.write(p)
		}
		return len(p), nil
	}
	if r.want[ResultStdout] {
		r.stdout.write(p)
	}
	r.scanLines(p)
	return len(p), nil
}

// scanLines feeds stdout into the set-output parser line by line.
func (r *results) scanLines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.line)+len(p) > maxLine {
				r.lineTooLong, r.line = true, r.line[:0]
			} else {
				r.line = append(r.line, p...)
			}
			return
		}
		if !r.lineTooLong && len(r.line)+i <= maxLine {
			r.line = append(r.line, p[:i]...)
			r.setOutput(string(r.line))
		}
		r.line, r.lineTooLong = r.line[:0], false
		p = p[i+1:]
	}
}

// setOutput records a `##[set-output key=value]` line. A value prefixed "base64," is decoded;
// any other is unescaped (%25, %0D, %0A: the escapes that let one line carry any text).
func (r *results) setOutput(line string) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, setOutputTag) || !strings.HasSuffix(line, "]") {
		return
	}
	key, value, ok := strings.Cut(line[len(setOutputTag):len(line)-1], "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return
	}
	if enc, isB64 := strings.CutPrefix(value, "base64,"); isB64 {
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return
		}
		value = string(dec)
	} else {
		value = strings.NewReplacer("%0A", "\n", "%0a", "\n", "%0D", "\r", "%0d", "\r", "%25", "%").Replace(value)
	}
	if len(value) >= maxValue {
		return
	}
	r.outputs[key] = value
}

// finish completes the stdout line in progress and returns the job's result values; code is nil
// when the job never produced an exit code.
func (r *results) finish(code *int) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.line) > 0 && !r.lineTooLong {
		r.setOutput(string(r.line))
	}
	out := map[string]string{}
	for k, v := range r.outputs {
		out[k] = v
	}
	if code != nil {
		out[ResultCode] = strconv.Itoa(*code)
	}
	// Streams lose their trailing newlines, as with the shell's $(…).
	for key, c := range map[string]*capped{ResultStdout: &r.stdout, ResultStderr: &r.stderr, ResultInfo: &r.info} {
		if r.want[key] && len(c.b) <= maxValue {
			out[key] = strings.TrimRight(string(c.b), "\r\n")
		}
	}
	return out
}

// metricPrefix starts the set-output keys that are metrics: `##[set-output metric.loss=0.25]`.
const metricPrefix = "metric."

// metricValues are the metrics among a job's result values: keys metric.<name> whose name is
// valid and whose value is a finite number, neither holding a secret. Others are left out with a
// note; past MaxMetricsPerJob, the names first in order are kept. A name or value that holds a
// secret is left out rather than masked: masked, a name is no longer a valid one (the server
// would refuse the whole job_finished), and a masked number is no number.
func metricValues(values map[string]string, note func(format string, args ...any), secret func(string) bool) map[string]float64 {
	var names []string
	for key := range values {
		if name, ok := strings.CutPrefix(key, metricPrefix); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	out := map[string]float64{}
	for _, name := range names {
		raw := strings.TrimSpace(values[metricPrefix+name])
		v, err := strconv.ParseFloat(raw, 64)
		switch {
		case secret(name):
			note("metric %q: its name holds a secret; left out", name)
		case secret(raw):
			note("metric %s: its value holds a secret; left out", name)
		case !protocol.ValidMetricName(name):
			note("metric %q: a name is 1 to %d letters, digits and _.-/; left out", name, protocol.MaxMetricName)
		case err != nil || math.IsInf(v, 0) || math.IsNaN(v):
			note("metric %s: %q is not a finite number; left out", name, raw)
		case len(out) == protocol.MaxMetricsPerJob:
			note("metric %s: a job reports at most %d metrics; left out", name, protocol.MaxMetricsPerJob)
		default:
			out[name] = v
		}
	}
	return out
}
