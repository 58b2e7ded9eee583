// Package fakeserver is a fake Nimbus control plane over real HTTP, for the agent's tests only.
//
// It implements the agent API of internal/protocol with a small state machine — a lease is queued,
// leased by a poll, then finished, cancelled (renew answers Cancel) or lost (every lease call
// answers 409 lease_lost) — and records what the agent sent: registrations, polls, renewals,
// events, log bytes by offset and the finish. Like Buildkite's fake API server it is real HTTP on
// a loopback port, because a fake that skips the network also skips the bugs that live there
// (encoding, status codes, retries, connection reuse). It can also serve bare git repositories
// through `git http-backend`, guarded by the job token as HTTP Basic auth.
package fakeserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Fault says how the server mishandles one log append.
type Fault int

const (
	// FaultNone handles the append normally.
	FaultNone Fault = iota
	// FaultBefore answers 500 without storing anything.
	FaultBefore
	// FaultAfter stores the bytes, then answers 500 as if the answer was lost on the way.
	FaultAfter
)

// Lease states.
const (
	StateQueued   = "queued"
	StateLeased   = "leased"
	StateFinished = "finished"
	StateLost     = "lost"
)

// Server is the fake control plane. Set the exported fields before the agent starts.
type Server struct {
	*httptest.Server

	RegistrationToken string
	AgentToken        string
	Intervals         protocol.RegisterResponse // token fields are ignored
	// LogFault, when set, is asked about every log append (n counts from 1 over all of them).
	LogFault func(n int) Fault

	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every state change, to wake waiters
	queue         []string
	leases        map[string]*Lease
	registrations []protocol.RegisterRequest
	polls         []protocol.PollRequest
	logAppends    int
	down          bool // every agent call answers 503, as while the server is away
	deregistered  int
	gitRoot       string
	gitAuth       []string
	files         map[string]protocol.ImportFile // by URL, for imports
	imports       []protocol.ImportRequest
	locks         map[string]string // key → holder (HoldLock's, or "lease <id> <scope>")
}

// Lease is the server's record of one lease.
type Lease struct {
	Lease   protocol.Lease
	State   string
	Cancel  string // reason; renew answers Cancel while it is set
	Renews  int
	Events  []protocol.Event
	Logs    map[int64][]byte
	Finish  *protocol.FinishRequest
	Finishs int
}

// New starts a fake server with short intervals; it stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		RegistrationToken: "reg-token",
		AgentToken:        "agent-token-1",
		Intervals: protocol.RegisterResponse{
			HeartbeatInterval: protocol.Duration(200 * time.Millisecond),
			PollTimeout:       protocol.Duration(300 * time.Millisecond),
			LogFlushInterval:  protocol.Duration(100 * time.Millisecond),
			LeaseTTL:          protocol.Duration(2 * time.Second),
		},
		changed: make(chan struct{}),
		leases:  map[string]*Lease{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+protocol.PathRegister, s.unlessDown(s.register))
	mux.HandleFunc("POST "+protocol.PathPoll, s.unlessDown(s.poll))
	mux.HandleFunc("POST "+protocol.PathControl, s.unlessDown(s.control))
	mux.HandleFunc("POST "+protocol.PathDeregister, s.unlessDown(s.deregister))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/renew", s.unlessDown(s.renew))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/events", s.unlessDown(s.event))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/jobs/{job}/log", s.unlessDown(s.appendLog))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/finish", s.unlessDown(s.finish))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/"+protocol.PathImportsSuffix, s.unlessDown(s.importFile))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/"+protocol.PathLocksSuffix, s.unlessDown(s.lock))
	mux.HandleFunc("POST "+protocol.PathLeases+"{id}/"+protocol.PathLocksReleaseSuffix, s.unlessDown(s.unlock))
	mux.HandleFunc("/git/", s.git)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Enqueue queues a lease for the next poll. Its ID must be unique.
func (s *Server) Enqueue(l protocol.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[l.ID] = &Lease{Lease: l, State: StateQueued, Logs: map[int64][]byte{}}
	s.queue = append(s.queue, l.ID)
	s.notifyLocked()
}

// CancelLease makes the control long-poll and the next renewals of the lease answer Cancel
// with reason.
func (s *Server) CancelLease(id, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[id].Cancel = reason
	s.notifyLocked()
}

// SetDown makes every agent API call answer 503 (true), as while the server is away, or serve
// again (false). Nothing the agent sends meanwhile is recorded.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	s.notifyLocked()
}

// Deregistered counts the deregistrations received.
func (s *Server) Deregistered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deregistered
}

func (s *Server) unlessDown(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		if down {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the server is down")
			return
		}
		h(w, r)
	}
}

// SetAgentToken replaces the token the server accepts from agents, as when an operator revokes
// one: the old token gets 401, and a registration hands out the new one.
func (s *Server) SetAgentToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.AgentToken = token
}

// LoseLease makes every later call on the lease answer 409 lease_lost, as after a reap.
func (s *Server) LoseLease(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[id].State = StateLost
	s.notifyLocked()
}

// Get returns a copy of the server's record of a lease.
func (s *Server) Get(id string) Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := *s.leases[id]
	l.Events = slices.Clone(l.Events)
	l.Logs = map[int64][]byte{}
	for k, v := range s.leases[id].Logs {
		l.Logs[k] = slices.Clone(v)
	}
	return l
}

// Registrations returns what the agent registered with, in order.
func (s *Server) Registrations() []protocol.RegisterRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.registrations)
}

// Polls returns every poll request received, in order.
func (s *Server) Polls() []protocol.PollRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.polls)
}

// WaitFor waits until cond holds for the lease record, or fails the test after timeout.
func (s *Server) WaitFor(t testing.TB, id string, timeout time.Duration, what string, cond func(Lease) bool) Lease {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if l := s.Get(id); cond(l) {
			return l
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("lease %s: %s did not happen within %v (state %s, %d events)", id, what, timeout,
				s.Get(id).State, len(s.Get(id).Events))
		}
	}
}

// WaitFinished waits for the finish of a lease.
func (s *Server) WaitFinished(t testing.TB, id string, timeout time.Duration) Lease {
	t.Helper()
	return s.WaitFor(t, id, timeout, "finish", func(l Lease) bool { return l.Finish != nil })
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// writeError answers with the API's one error envelope.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if bearer(r) != s.RegistrationToken {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "bad registration token")
		return
	}
	var req protocol.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	s.mu.Lock()
	s.registrations = append(s.registrations, req)
	resp := s.Intervals
	resp.AgentID = "srv-agent-" + strconv.Itoa(len(s.registrations))
	resp.Token = s.AgentToken
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, resp)
}

func (s *Server) poll(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	token := s.AgentToken
	s.mu.Unlock()
	if bearer(r) != token {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "unknown agent token")
		return
	}
	var req protocol.PollRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	s.mu.Lock()
	s.polls = append(s.polls, req)
	s.notifyLocked()
	s.mu.Unlock()
	deadline := time.NewTimer(s.Intervals.PollTimeout.Std())
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		if len(s.queue) > 0 {
			l := s.leases[s.queue[0]]
			s.queue = s.queue[1:]
			l.State = StateLeased
			s.notifyLocked()
			s.mu.Unlock()
			writeJSON(w, l.Lease)
			return
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// control answers the leases of req.Running that are cancelled, at once or when one is, or
// nothing after the heartbeat interval.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	var req protocol.ControlRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	s.mu.Lock()
	if bearer(r) != s.AgentToken {
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "unauthenticated", "unknown agent token")
		return
	}
	s.mu.Unlock()
	deadline := time.NewTimer(s.Intervals.HeartbeatInterval.Std())
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		var resp protocol.ControlResponse
		for _, id := range req.Running {
			if l := s.leases[id]; l != nil && l.Cancel != "" && l.State == StateLeased {
				resp.Stop = append(resp.Stop, protocol.Stop{LeaseID: id, Reason: l.Cancel})
			}
		}
		s.mu.Unlock()
		if len(resp.Stop) > 0 {
			writeJSON(w, resp)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeJSON(w, resp)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bearer(r) != s.AgentToken {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "unknown agent token")
		return
	}
	s.deregistered++
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

// leaseFor authenticates a lease call and returns the record, locked; it answers the error
// itself and returns nil when the call is refused.
func (s *Server) leaseFor(w http.ResponseWriter, r *http.Request) *Lease {
	s.mu.Lock()
	if bearer(r) != s.AgentToken {
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "unauthenticated", "unknown agent token")
		return nil
	}
	l, ok := s.leases[r.PathValue("id")]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "no such lease")
		return nil
	}
	if l.State == StateLost {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, protocol.ErrCodeLeaseLost, "the lease is no longer held")
		return nil
	}
	return l
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	l := s.leaseFor(w, r)
	if l == nil {
		return
	}
	l.Renews++
	resp := protocol.RenewResponse{ExpiresAt: time.Now().Add(s.Intervals.LeaseTTL.Std())}
	if l.Cancel != "" {
		resp.Cancel, resp.Reason = true, l.Cancel
	}
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, resp)
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	l := s.leaseFor(w, r)
	if l == nil {
		return
	}
	defer s.mu.Unlock()
	var ev protocol.Event
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	l.Events = append(l.Events, ev)
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

// appendLog is idempotent by offset, as the protocol says: it keeps what it has, stores only
// bytes past that, refuses a gap, and answers the offset it holds.
func (s *Server) appendLog(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	l := s.leaseFor(w, r)
	if l == nil {
		return
	}
	defer s.mu.Unlock()
	job, err1 := strconv.ParseInt(r.PathValue("job"), 10, 64)
	offset, err2 := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err1 != nil || err2 != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "bad job or offset")
		return
	}
	s.logAppends++
	fault := FaultNone
	if s.LogFault != nil {
		fault = s.LogFault(s.logAppends)
	}
	if fault == FaultBefore {
		writeError(w, http.StatusInternalServerError, "internal", "injected fault before storing")
		return
	}
	have := l.Logs[job]
	if end := offset + int64(len(body)); offset <= int64(len(have)) && end > int64(len(have)) {
		l.Logs[job] = append(have, body[int64(len(have))-offset:]...)
	}
	s.notifyLocked()
	if fault == FaultAfter {
		writeError(w, http.StatusInternalServerError, "internal", "injected fault after storing")
		return
	}
	writeJSON(w, protocol.LogAck{Offset: int64(len(l.Logs[job]))})
}

func (s *Server) finish(w http.ResponseWriter, r *http.Request) {
	l := s.leaseFor(w, r)
	if l == nil {
		return
	}
	defer s.mu.Unlock()
	var req protocol.FinishRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	l.Finishs++
	if l.Finish == nil {
		l.Finish = &req
		l.State = StateFinished
	}
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

// SetImport makes the file at url importable: imports, settingsFrom and optionsFrom get f. Unlike
// the real server it checks no rules; a URL without a file answers 404.
func (s *Server) SetImport(url string, f protocol.ImportFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]protocol.ImportFile{}
	}
	s.files[url] = f
}

// Imports are the import requests the agent made, in order.
func (s *Server) Imports() []protocol.ImportRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.imports)
}

func (s *Server) importFile(w http.ResponseWriter, r *http.Request) {
	l := s.leaseFor(w, r)
	if l == nil {
		return
	}
	defer s.mu.Unlock()
	var req protocol.ImportRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	s.imports = append(s.imports, req)
	f, ok := s.files[req.URL]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such file")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(f)
}

// HoldLock makes holder hold the lock key, as another pipeline would; FreeLock frees it.
func (s *Server) HoldLock(key, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks == nil {
		s.locks = map[string]string{}
	}
	s.locks[key] = holder
}

// FreeLock frees the lock key, whoever holds it.
func (s *Server) FreeLock(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.locks, key)
}

// LockHolder says who holds the lock key.
func (s *Server) LockHolder(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.locks[key]
	return h, ok
}

func (s *Server) lockRequest(w http.ResponseWriter, r *http.Request) (protocol.LockRequest, string, bool) {
	l := s.leaseFor(w, r)
	if l == nil {
		return protocol.LockRequest{}, "", false
	}
	var req protocol.LockRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" || req.Scope == "" {
		s.mu.Unlock()
		writeError(w, http.StatusUnprocessableEntity, "validation_failed", "key and scope are required")
		return req, "", false
	}
	if s.locks == nil {
		s.locks = map[string]string{}
	}
	return req, "lease " + l.Lease.ID + " " + req.Scope, true
}

func (s *Server) lock(w http.ResponseWriter, r *http.Request) {
	req, me, ok := s.lockRequest(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	res := protocol.LockResponse{Acquired: true}
	if cur, held := s.locks[req.Key]; held && cur != me {
		res = protocol.LockResponse{Holder: cur}
	} else {
		s.locks[req.Key] = me
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

func (s *Server) unlock(w http.ResponseWriter, r *http.Request) {
	req, me, ok := s.lockRequest(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	if s.locks[req.Key] == me {
		delete(s.locks, req.Key)
	}
	w.WriteHeader(http.StatusNoContent)
}

// EventsOf returns the events of one kind for one job, in order.
func (l Lease) EventsOf(kind string, jobID int64) []protocol.Event {
	var out []protocol.Event
	for _, e := range l.Events {
		if e.Kind == kind && e.JobID == jobID {
			out = append(out, e)
		}
	}
	return out
}

// JobFinished returns the job_finished event of a job, failing the test when there is not
// exactly one.
func (l Lease) JobFinished(t testing.TB, jobID int64) protocol.Event {
	t.Helper()
	evs := l.EventsOf(protocol.EventJobFinished, jobID)
	if len(evs) != 1 {
		t.Fatalf("job %d has %d job_finished events, want 1: %+v", jobID, len(evs), l.Events)
	}
	return evs[0]
}

func (l Lease) String() string {
	return fmt.Sprintf("lease %s %s finish=%+v events=%d", l.Lease.ID, l.State, l.Finish, len(l.Events))
}
