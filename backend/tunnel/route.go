package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Routing records: which replica holds which agent's session. One key per agent, written by
// the replica that accepts the agent's connection (the newest connection wins), refreshed while
// the session lives and deleted when it ends — both only while the record is still that
// session's, so a replica whose session was superseded never erases the newer record.

// DefaultRecordTTL is how long a record outlives a replica that stopped refreshing it (a crash).
const DefaultRecordTTL = 30 * time.Second

func recordKey(agentID string) string { return "nimbus:tunnel:agent:" + agentID }

// record is the value of an agent's key.
type record struct {
	Replica string `json:"replica"`
	URL     string `json:"url,omitempty"` // the holder's internal URL; "" = not reachable by others
	Session string `json:"session"`
}

// refreshScript extends the record when it is still ARGV[1] and restores it when it is gone
// (Redis lost it); 0 means another session has taken the agent.
var refreshScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
`)

// releaseScript deletes the record when it is still ARGV[1].
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// newSession names a session of the agent and makes its record's value.
func (h *Hub) newSession(agentID string) *session {
	s := &session{agentID: agentID, id: randomID()}
	b, _ := json.Marshal(record{Replica: h.replica, URL: h.ownURL(), Session: s.id})
	s.record = string(b)
	return s
}

func (h *Hub) ownURL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.internalURL
}

// claim records s as the agent's session, over whatever was recorded.
func (h *Hub) claim(ctx context.Context, s *session) error {
	if h.cfg.Redis == nil {
		return nil
	}
	if err := h.cfg.Redis.Set(ctx, recordKey(s.agentID), s.record, h.cfg.RecordTTL).Err(); err != nil {
		return fmt.Errorf("tunnel: record the session: %w", err)
	}
	return nil
}

// refresh extends s's record; false means a newer session has taken the agent.
func (h *Hub) refresh(ctx context.Context, s *session) (bool, error) {
	if h.cfg.Redis == nil {
		return true, nil
	}
	n, err := refreshScript.Run(ctx, h.cfg.Redis, []string{recordKey(s.agentID)}, s.record, h.cfg.RecordTTL.Milliseconds()).Int()
	if err != nil {
		return true, fmt.Errorf("tunnel: refresh the session's record: %w", err)
	}
	return n == 1, nil
}

// release deletes s's record unless a newer session has taken the agent.
func (h *Hub) release(ctx context.Context, s *session) {
	if h.cfg.Redis == nil {
		return
	}
	if err := releaseScript.Run(ctx, h.cfg.Redis, []string{recordKey(s.agentID)}, s.record).Err(); err != nil {
		h.log.Warn("tunnel: could not delete the session's record; it runs out on its own", "agent_id", s.agentID, "err", err)
	}
}

// lookup returns the agent's record, nil when there is none.
func (h *Hub) lookup(ctx context.Context, agentID string) (*record, error) {
	if h.cfg.Redis == nil {
		return nil, nil
	}
	v, err := h.cfg.Redis.Get(ctx, recordKey(agentID)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel: read the agent's record: %w", err)
	}
	var r record
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, fmt.Errorf("tunnel: agent %s has a malformed record: %w", agentID, err)
	}
	return &r, nil
}
