package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// cnb:resolve and cnb:await order pipelines of one build (../../shared/cnb-reference.md §2.3,
// built-in tasks): a resolve records a key of the build once, with its data; an await returns
// that data once the key is resolved. The agent asks again while it waits (agent/runner), and
// each ask checks for a dead lock, which ends the await with "dead lock found.":
//
//   - no pipeline of the build resolves the key (its plan has no cnb:resolve of it);
//   - every pipeline that would resolve it has ended without doing so;
//   - the waits form a cycle: the resolvers of the key await keys whose resolvers … await a key
//     this pipeline resolves;
//   - a second resolve of a key (that resolve fails).
//
// A pipeline that fails its await ends, so the others of the cycle find their resolver gone at
// their next ask and fail too.

// BuildKey is a resolved key (migration 00018).
type BuildKey struct {
	ID         int64     `gorm:"primaryKey"`
	BuildID    int64     `gorm:"not null"`
	Key        string    `gorm:"not null"`
	PipelineID int64     `gorm:"not null"`
	Data       string    `gorm:"not null"` // JSON
	ResolvedAt time.Time `gorm:"not null"`
}

// BuildWait is a pipeline awaiting a key now.
type BuildWait struct {
	ID         int64     `gorm:"primaryKey"`
	BuildID    int64     `gorm:"not null"`
	PipelineID int64     `gorm:"not null"`
	Key        string    `gorm:"not null"`
	Since      time.Time `gorm:"not null"`
}

// TaskAwait is the type of the built-in task that awaits a key.
const TaskAwait = "cnb:await"

// deadLock is CNB's message for every await that can never end.
const deadLock = "dead lock found."

// Resolve records key of the pipeline's build with data; a key resolved before is a conflict.
func (s *Service) Resolve(ctx context.Context, p *Pipeline, key string, data map[string]any) error {
	if err := checkKey(key); err != nil {
		return err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fault.Invalid("data", "data must be JSON: %v", err)
	}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&BuildKey{BuildID: p.BuildID, Key: key,
		PipelineID: p.ID, Data: string(raw), ResolvedAt: s.clock.Now().UTC()})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.Conflict("%s key %q was resolved already in this build", deadLock, key)
	}
	return nil
}

// Await returns the data of key once it is resolved (nil, false while it is not), and a
// conflict naming the dead lock when it never will be.
func (s *Service) Await(ctx context.Context, p *Pipeline, key string) (map[string]any, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	db := s.db.WithContext(ctx)
	var k BuildKey
	err := db.Where("build_id = ? AND key = ?", p.BuildID, key).Take(&k).Error
	if err == nil {
		db.Where("pipeline_id = ? AND key = ?", p.ID, key).Delete(&BuildWait{})
		data := map[string]any{}
		json.Unmarshal([]byte(k.Data), &data)
		return data, true, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, false, err
	}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&BuildWait{BuildID: p.BuildID, PipelineID: p.ID, Key: key,
		Since: s.clock.Now().UTC()}).Error; err != nil {
		return nil, false, err
	}
	if why, err := s.deadLock(ctx, p, key); err != nil || why != "" {
		if why != "" {
			db.Where("pipeline_id = ? AND key = ?", p.ID, key).Delete(&BuildWait{})
			return nil, false, fault.Conflict("%s %s", deadLock, why)
		}
		return nil, false, err
	}
	return nil, false, nil
}

// EndAwait forgets the pipeline's waits (its await timed out, or it ended).
func (s *Service) EndAwait(ctx context.Context, p *Pipeline) error {
	return s.db.WithContext(ctx).Where("pipeline_id = ?", p.ID).Delete(&BuildWait{}).Error
}

func checkKey(key string) error {
	if strings.TrimSpace(key) == "" || len(key) > 200 {
		return fault.Invalid("key", "a key is 1 to 200 characters")
	}
	return nil
}

// deadLock says why the pipeline's await of key can never end, "" when it still may.
func (s *Service) deadLock(ctx context.Context, p *Pipeline, key string) (string, error) {
	var ps []Pipeline
	if err := s.db.WithContext(ctx).Select("id, name, status, plan").Where("build_id = ?", p.BuildID).Find(&ps).Error; err != nil {
		return "", err
	}
	var waits []BuildWait
	if err := s.db.WithContext(ctx).Where("build_id = ?", p.BuildID).Find(&waits).Error; err != nil {
		return "", err
	}
	var resolved []string
	if err := s.db.WithContext(ctx).Model(&BuildKey{}).Where("build_id = ?", p.BuildID).Pluck("key", &resolved).Error; err != nil {
		return "", err
	}
	done := map[string]bool{}
	for _, k := range resolved {
		done[k] = true
	}
	resolvers := map[string][]Pipeline{} // key → the pipelines whose plan resolves it
	for _, q := range ps {
		for _, k := range resolveKeys(q.Plan) {
			resolvers[k] = append(resolvers[k], q)
		}
	}
	waitsOf := map[int64][]string{}
	for _, w := range waits {
		waitsOf[w.PipelineID] = append(waitsOf[w.PipelineID], w.Key)
	}
	if done[key] {
		return "", nil // resolved since the caller looked: its next ask gets it
	}
	rs := resolvers[key]
	if len(rs) == 0 {
		return fmt.Sprintf("no pipeline of this build resolves %q", key), nil
	}
	live := false
	for _, r := range rs {
		if !Terminal(r.Status) {
			live = true
		}
	}
	if !live {
		return fmt.Sprintf("every pipeline that resolves %q ended without resolving it", key), nil
	}
	// A cycle: from key's live resolvers, through the keys they await, back to this pipeline.
	// This pipeline resolving the key itself is no cycle: a parallel job of it may do so.
	seen := map[string]bool{}
	var reaches func(k string, top bool) bool
	reaches = func(k string, top bool) bool {
		if seen[k] || done[k] {
			return false
		}
		seen[k] = true
		for _, r := range resolvers[k] {
			switch {
			case Terminal(r.Status):
				continue
			case r.ID == p.ID && top:
				continue
			case r.ID == p.ID:
				return true
			}
			for _, next := range waitsOf[r.ID] {
				if reaches(next, false) {
					return true
				}
			}
		}
		return false
	}
	if reaches(key, true) {
		return fmt.Sprintf("the awaits of %q and the pipelines that resolve it wait for each other", key), nil
	}
	return "", nil
}

// resolveKeys are the keys a pipeline's plan resolves (its cnb:resolve jobs' options.key).
func resolveKeys(plan string) []string {
	if !strings.Contains(plan, "cnb:resolve") {
		return nil
	}
	var pl protocol.Plan
	if json.Unmarshal([]byte(plan), &pl) != nil {
		return nil
	}
	var out []string
	for _, group := range [][]protocol.Stage{pl.Stages, pl.FailStages, pl.EndStages} {
		for _, st := range group {
			for _, j := range st.Jobs {
				if j.Type == "cnb:resolve" {
					if k, ok := j.Options["key"].(string); ok {
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

// awaitedTime is, per pipeline, how long its cnb:await jobs ran (until now for one running),
// with overlapping awaits (parallel jobs of a stage) counted once: the time its node was held
// waiting for another pipeline.
func awaitedTime(jobs []Job, now time.Time) map[int64]time.Duration {
	type span struct{ from, to time.Time }
	spans := map[int64][]span{}
	for _, j := range jobs {
		if j.Type != TaskAwait || j.StartedAt == nil {
			continue
		}
		to := now
		if j.FinishedAt != nil {
			to = *j.FinishedAt
		}
		if to.After(*j.StartedAt) {
			spans[j.PipelineID] = append(spans[j.PipelineID], span{*j.StartedAt, to})
		}
	}
	out := make(map[int64]time.Duration, len(spans))
	for id, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int { return a.from.Compare(b.from) })
		var total time.Duration
		cur := ss[0]
		for _, s := range ss[1:] {
			if !s.from.After(cur.to) {
				if s.to.After(cur.to) {
					cur.to = s.to
				}
				continue
			}
			total += cur.to.Sub(cur.from)
			cur = s
		}
		out[id] = total + cur.to.Sub(cur.from)
	}
	return out
}
