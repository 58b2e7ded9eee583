package agentapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The room's own rules, with the rooms behind it replaced by recorders: the real scheduler,
// build, repo and logs behind these routes are driven end to end by backend/app's and e2e's
// tests (the built-in agent and the authorization matrix call every route).

// fakeDispatch knows one agent, by its token "tok".
type fakeDispatch struct{ Dispatch }

func (fakeDispatch) AgentByToken(_ context.Context, token string) (*scheduler.Agent, error) {
	if token != "tok" {
		return nil, fault.Unauthenticated("unknown agent token")
	}
	return &scheduler.Agent{ID: "agt_1"}, nil
}

// fakeRuns records the calls that reach build and fences leases like build: only "lease_1".
type fakeRuns struct {
	Runs
	calls []string
}

func (r *fakeRuns) fence(agentID, leaseID string) error {
	if agentID != "agt_1" || leaseID != "lease_1" {
		return build.ErrLeaseLost
	}
	return nil
}

func (r *fakeRuns) Finish(_ context.Context, agentID, leaseID string, req protocol.FinishRequest) (*build.Pipeline, bool, error) {
	r.calls = append(r.calls, "finish "+agentID+" "+leaseID+" "+req.Status)
	return nil, false, r.fence(agentID, leaseID)
}

func (r *fakeRuns) Event(_ context.Context, agentID, leaseID string, ev protocol.Event) error {
	r.calls = append(r.calls, "event "+agentID+" "+leaseID+" "+ev.Kind)
	return r.fence(agentID, leaseID)
}

func (r *fakeRuns) CheckJob(_ context.Context, agentID, leaseID string, jobID int64) error {
	r.calls = append(r.calls, "checkjob")
	return r.fence(agentID, leaseID)
}

type fakeLogs struct{ got []string }

func (l *fakeLogs) Append(_ context.Context, jobID, offset int64, data []byte) (int64, error) {
	l.got = append(l.got, string(data))
	return offset + int64(len(data)), nil
}

func serve(t *testing.T, cfg Config) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.TestMode)
	r := gin.New()
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	NewHandler(cfg).Routes(r, r.Group("/api/v1"))
	return r
}

func call(r *gin.Engine, token, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

func TestAgentRoutes(t *testing.T) {
	runs := &fakeRuns{}
	logs := &fakeLogs{}
	r := serve(t, Config{Dispatch: fakeDispatch{}, Runs: runs, Logs: logs})
	noSink := serve(t, Config{Dispatch: fakeDispatch{}, Runs: runs})
	for _, tc := range []struct {
		name   string
		r      *gin.Engine
		token  string
		path   string
		body   string
		status int
		code   string // the envelope's code, for a refusal
		call   string // the last call that reached build
	}{
		{"no token", r, "", "/api/v1/agent/leases/lease_1/finish", `{"status":"success"}`, 401, "unauthenticated", ""},
		{"wrong token", r, "nope", "/api/v1/agent/leases/lease_1/events", `{}`, 401, "unauthenticated", ""},
		{"finish", r, "tok", "/api/v1/agent/leases/lease_1/finish", `{"status":"success","field_of_a_newer_agent":1}`, 204, "", "finish agt_1 lease_1 success"},
		{"finish on a lost lease", r, "tok", "/api/v1/agent/leases/lease_2/finish", `{"status":"failed"}`, 409, "lease_lost", "finish agt_1 lease_2 failed"},
		{"event", r, "tok", "/api/v1/agent/leases/lease_1/events", `{"kind":"job_started","job_id":3}`, 204, "", "event agt_1 lease_1 job_started"},
		{"trailing data", r, "tok", "/api/v1/agent/leases/lease_1/events", `{"kind":"job_started"} {}`, 400, "", ""},
		{"log", r, "tok", "/api/v1/agent/leases/lease_1/jobs/3/log?offset=0", "hello", 200, "", "checkjob"},
		{"log without offset", r, "tok", "/api/v1/agent/leases/lease_1/jobs/3/log", "hello", 400, "bad_request", ""},
		{"log of another lease", r, "tok", "/api/v1/agent/leases/lease_2/jobs/3/log?offset=0", "x", 409, "lease_lost", "checkjob"},
		{"log without a sink", noSink, "tok", "/api/v1/agent/leases/lease_1/jobs/3/log?offset=0", "x", 503, "", "checkjob"},
		{"import of an unknown kind", r, "tok", "/api/v1/agent/leases/lease_1/" + protocol.PathImportsSuffix, `{"kind":"secrets","url":"x"}`, 422, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs.calls = nil
			w := call(tc.r, tc.token, tc.path, tc.body)
			if w.Code != tc.status || (tc.code != "" && !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`)) {
				t.Fatalf("status %d %s, want %d %s", w.Code, w.Body, tc.status, tc.code)
			}
			last := ""
			if len(runs.calls) > 0 {
				last = runs.calls[len(runs.calls)-1]
			}
			if last != tc.call {
				t.Fatalf("build was called %q, want %q", runs.calls, tc.call)
			}
		})
	}
	if len(logs.got) != 1 || logs.got[0] != "hello" {
		t.Fatalf("the log sink got %q, want the one accepted chunk", logs.got)
	}
}

// cnb:apply runs only on the events CNB lists (and their named variants).
func TestApplyAllowed(t *testing.T) {
	for event, want := range map[string]bool{
		"push": true, "tag_push": true, "api_trigger_deploy": true, "web_trigger_x": true, "tag_deploy.production": true,
		"pull_request": false, "vscode": false, "api_triggerx": false, "": false,
	} {
		if got := applyAllowed(event); got != want {
			t.Errorf("applyAllowed(%q) = %v, want %v", event, got, want)
		}
	}
}
