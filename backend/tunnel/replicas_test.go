package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Two replicas share the test Redis; the agent's connection is on one of them.

func TestStreamThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ag := &agents{}
	a, b := newReplica(t, ag, Config{Redis: rdb}), newReplica(t, ag, Config{Redis: rdb})
	agent := startAgent(t, ag, a)
	waitConnected(t, a, agent, nil)

	rec := readRecord(t, a, agent.id)
	if rec.Replica != a.hub.replica || rec.URL != a.srv.URL {
		t.Fatalf("record %+v, want replica %s at %s", rec, a.hub.replica, a.srv.URL)
	}
	echo(t, b, agent.id, "B → A → agent")
	echo(t, a, agent.id, "A → agent")
	if err := roundTrip(b, agent.id, randomBytes(t, 4<<20)); err != nil {
		t.Fatalf("4 MiB echo through B: %v", err)
	}
	_, err := b.hub.Open(context.Background(), agent.id, Header{Kind: "teleport"})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("an unknown kind through B: %v, want the agent's refusal", err)
	}

	// The agent's connection breaks and it comes back on B: now A forwards.
	agent.net.point(b)
	agent.net.cut()
	waitConnected(t, b, agent, nil)
	eventually(t, "A forwards to B", func() error {
		if rec := readRecord(t, a, agent.id); rec.Replica != b.hub.replica {
			return errors.New("the record still names A")
		}
		return nil
	})
	echo(t, a, agent.id, "A → B → agent")
	echo(t, b, agent.id, "B → agent")

	// The agent goes away for good: its record goes with it.
	agent.stop()
	eventually(t, "the record is deleted", func() error {
		if n, _ := rdb.Exists(context.Background(), recordKey(agent.id)).Result(); n != 0 {
			return errors.New("still there")
		}
		return nil
	})
	if _, err := a.hub.Open(context.Background(), agent.id, Header{Kind: "echo"}); !errors.Is(err, ErrNoTunnel) {
		t.Errorf("open to a stopped agent: %v, want ErrNoTunnel", err)
	}
}

func TestStaleSessionOnAnotherReplicaCloses(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ag := &agents{}
	// A pings rarely, so only the routing record can tell it that its session went stale (it
	// looks every RecordTTL/3). B keeps the default TTL: with 600 ms, a loaded CI machine once
	// let B's record lapse between two refreshes, and A then found no tunnel at all.
	slow := Config{Redis: rdb, Keepalive: time.Minute, Timeout: time.Minute, RecordTTL: 600 * time.Millisecond}
	a, b := newReplica(t, ag, slow), newReplica(t, ag, Config{Redis: rdb})
	agent := startAgent(t, ag, a, quickPings)
	stale := waitConnected(t, a, agent, nil)
	echo(t, a, agent.id, "both ends are up") // the agent has read the 101 too

	agent.net.point(b)
	agent.net.freeze(t, stale)
	waitConnected(t, b, agent, nil)
	eventually(t, "A closes the session B superseded", func() error {
		if !stale.mux.IsClosed() {
			return errors.New("still open")
		}
		return nil
	})
	echo(t, a, agent.id, "A → B → agent")
	// A's stale session must not have erased B's record on its way out.
	if rec := readRecord(t, b, agent.id); rec.Replica != b.hub.replica {
		t.Fatalf("record %+v, want B's", rec)
	}
}

func TestRecordOutlivesRedisLoss(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ag := &agents{}
	a, b := newReplica(t, ag, Config{Redis: rdb, RecordTTL: 600 * time.Millisecond}), newReplica(t, ag, Config{Redis: rdb})
	agent := startAgent(t, ag, a)
	waitConnected(t, a, agent, nil)
	// Redis forgets (a restart): A still reaches its own agent, and restores the record.
	rdb.Del(context.Background(), recordKey(agent.id))
	echo(t, a, agent.id, "local without a record")
	eventually(t, "the record is restored", func() error {
		if _, err := b.hub.lookup(context.Background(), agent.id); err != nil {
			return err
		}
		if rec, _ := b.hub.lookup(context.Background(), agent.id); rec == nil {
			return errors.New("no record yet")
		}
		return nil
	})
	echo(t, b, agent.id, "B → A again")
}

func TestForwardNeedsAReplicaSignature(t *testing.T) {
	t.Parallel()
	rdb := sharedRedis(t)
	ag := &agents{}
	a := newReplica(t, ag, Config{Redis: rdb})
	other := newReplica(t, ag, Config{Redis: rdb, Secret: []byte("another installation's key......")})
	agent := startAgent(t, ag, a)
	waitConnected(t, a, agent, nil)

	post := func(auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+PathForward+"?agent="+agent.id, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", forwardProtocol)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	now := time.Now()
	replayed := a.hub.authorization(agent.id, now)
	for name, auth := range map[string]string{
		"none":                 "",
		"an agent's token":     "Bearer nba_" + agent.id,
		"another key":          other.hub.authorization(agent.id, now),
		"for another agent":    a.hub.authorization("agent-other", now),
		"from a minute ago":    a.hub.authorization(agent.id, now.Add(-time.Minute)),
		"from a minute ahead":  a.hub.authorization(agent.id, now.Add(time.Minute)),
		"a garbled credential": authScheme + " " + strings.Repeat(".", 5),
	} {
		if resp := post(auth); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("forward with %s: %d, want 401", name, resp.StatusCode)
		}
	}
	if resp := post(replayed); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("forward with a good signature: %d, want 101", resp.StatusCode)
	}
	if resp := post(replayed); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replayed signature: %d, want 401", resp.StatusCode)
	}
	// A forward for an agent the replica does not hold is a 404, which the opener reports as
	// ErrNoTunnel.
	_, err := a.hub.forward(context.Background(), "agent-elsewhere", record{URL: a.srv.URL})
	if !errors.Is(err, ErrNoTunnel) {
		t.Errorf("forward for an agent not there: %v, want ErrNoTunnel", err)
	}
	// Replicas with another secret cannot reach each other's agents.
	_, err = other.hub.forward(context.Background(), agent.id, *readRecord(t, a, agent.id))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("forward signed with another key: %v, want a 401", err)
	}
}

func readRecord(t testing.TB, r *replica, agentID string) *record {
	t.Helper()
	v, err := r.hub.cfg.Redis.Get(context.Background(), recordKey(agentID)).Result()
	if err != nil {
		t.Fatalf("record of %s: %v", agentID, err)
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		t.Fatal(err)
	}
	return &rec
}
