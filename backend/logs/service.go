// Package logs stores the output of jobs and serves it to people, finished or live.
//
// The agent appends a job's log in chunks with byte offsets (through the agent API, which checks
// the lease and then calls Service.Append); the dashboard and the CLI read it with
// GET /api/v1/jobs/{id}/log (whole, a Range, or from an offset) and follow it live with
// GET /api/v1/jobs/{id}/log/stream (Server-Sent Events).
//
// Storage is the database: a job_logs row per job (size, truncated, complete) and log_chunks rows
// (job_id, byte_offset, data) in order. Every replica therefore sees the same log, a restarted
// server loses nothing, and deleting a repo deletes its logs by cascade. Object storage would be
// cheaper per byte for huge logs, but it would need a second consistency story (which parts are
// uploaded, who stitches them) for a cap of 100 MiB a job; the database already has one.
//
// Appends are idempotent by offset, which is what makes the agent's retries safe: the server
// answers the offset it holds and the agent resends from there. A conditional update of the
// job_logs row (WHERE size = offset) is the fast path; any other case takes the row lock and
// decides from the real size. Redis only carries notifications ("job 42's log changed"): a
// stream re-reads the database when one arrives, and also every few seconds in case one was lost,
// so Redis losing everything costs latency, never bytes.
package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Defaults of Config.
const (
	DefaultMaxSize   = 100 << 20
	DefaultChunkSize = 256 << 10
)

// publishTimeout bounds one notification.
const publishTimeout = time.Second

// Config tunes the service; zero fields take the defaults.
type Config struct {
	// MaxSize caps one job's log. The bytes past it are dropped after one truncation line, and
	// acknowledged so the agent stops sending them.
	MaxSize int64
	// ChunkSize is the most bytes one stored row holds. A bigger append is split, so a range read
	// never loads much more than it returns.
	ChunkSize int
}

// JobLog is the state of one job's log. The row exists from the first append (or Complete); a
// job without one has an empty, unfinished log.
type JobLog struct {
	JobID     int64     `gorm:"primaryKey;autoIncrement:false"`
	Size      int64     `gorm:"not null"` // bytes stored, the truncation line included
	Truncated bool      `gorm:"not null"`
	Complete  bool      `gorm:"not null"` // the job finished: streams end once they have read Size bytes
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// LogChunk is a run of a job's log bytes starting at ByteOffset.
type LogChunk struct {
	JobID      int64  `gorm:"primaryKey;autoIncrement:false"`
	ByteOffset int64  `gorm:"primaryKey;autoIncrement:false"`
	Data       []byte `gorm:"not null"`
	// ReceivedAt is when the server stored the piece, in Unix milliseconds (0: before times
	// were kept): the time of the lines that start in it.
	ReceivedAt int64 `gorm:"not null"`
}

// Service appends and reads job logs. It is safe for concurrent use, also from several replicas.
type Service struct {
	db    *gorm.DB
	rdb   redis.UniversalClient
	clock clock.Clock
	log   *slog.Logger
	cfg   Config
}

// NewService returns the log service.
func NewService(db *gorm.DB, rdb redis.UniversalClient, clk clock.Clock, log *slog.Logger, cfg Config) *Service {
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	return &Service{db: db, rdb: rdb, clock: clk, log: log, cfg: cfg}
}

// Append stores data as the bytes of jobID's log from offset on, and returns the offset the agent
// continues from:
//
//   - offset == stored size: data is stored; the answer is the new size.
//   - offset < stored size (a retry): only the tail the server lacks is stored, if any.
//   - offset > stored size (a gap): nothing is stored; the answer is the stored size, so the agent
//     resends from there.
//   - at the cap: exactly MaxSize bytes of output are kept, followed by one truncation line; from
//     then on every append is acknowledged (offset+len(data)) and dropped.
//
// Bytes that arrive after Complete are still stored: losing output is worse than a stream that
// ended a moment early, and a later read shows them.
func (s *Service) Append(ctx context.Context, jobID, offset int64, data []byte) (int64, error) {
	if offset < 0 {
		return 0, fault.BadRequest("log offset must not be negative")
	}
	var ack int64
	var changed bool
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var err error
		ack, changed, err = s.append(tx, jobID, offset, data)
		return err
	})
	if err != nil {
		return 0, err
	}
	if changed {
		s.publish(ctx, jobID, ack)
	}
	return ack, nil
}

// append runs in Append's transaction and reports the ack and whether anything was stored.
func (s *Service) append(tx *gorm.DB, jobID, offset int64, data []byte) (int64, bool, error) {
	now := s.clock.Now().UTC()
	n := int64(len(data))
	// Fast path, the agent's normal case: the row says exactly offset bytes are stored and this
	// append stays under the cap. The conditional update also takes the row lock, so a
	// concurrent append to this job waits here and then finds the size moved.
	if n > 0 && offset+n <= s.cfg.MaxSize {
		res := tx.Model(&JobLog{}).Where("job_id = ? AND size = ? AND truncated = ?", jobID, offset, false).
			Updates(map[string]any{"size": offset + n, "updated_at": now})
		if res.Error != nil {
			return 0, false, fmt.Errorf("logs: append to job %d: %w", jobID, res.Error)
		}
		if res.RowsAffected == 1 {
			return offset + n, true, s.insertChunks(tx, jobID, offset, data)
		}
	}

	st, err := s.lock(tx, jobID, now)
	if err != nil {
		return 0, false, err
	}
	switch {
	case st.Truncated:
		return offset + n, false, nil // dropped, but acknowledged so the agent moves on
	case offset > st.Size:
		return st.Size, false, nil
	case offset+n <= st.Size:
		return st.Size, false, nil // all of it is already stored
	}
	data = data[st.Size-offset:]
	room := s.cfg.MaxSize - st.Size
	if int64(len(data)) <= room {
		size := st.Size + int64(len(data))
		if err := s.setState(tx, jobID, size, false, now); err != nil {
			return 0, false, err
		}
		return size, true, s.insertChunks(tx, jobID, st.Size, data)
	}

	// This append crosses the cap: keep what fits, then the truncation line, once.
	kept := data[:room]
	var last byte = '\n'
	if len(kept) > 0 {
		last = kept[len(kept)-1]
	} else if st.Size > 0 {
		if last, err = s.lastByte(tx, jobID); err != nil {
			return 0, false, err
		}
	}
	line := truncationLine(s.cfg.MaxSize)
	if last != '\n' {
		line = "\n" + line
	}
	stored := append(kept[:len(kept):len(kept)], line...)
	if err := s.setState(tx, jobID, st.Size+int64(len(stored)), true, now); err != nil {
		return 0, false, err
	}
	return offset + n, true, s.insertChunks(tx, jobID, st.Size, stored)
}

// lock returns the job's log state with its row locked until the transaction ends, creating the
// row on the first append. SQLite needs no row lock: its IMMEDIATE transactions already run one
// writer at a time.
func (s *Service) lock(tx *gorm.DB, jobID int64, now time.Time) (JobLog, error) {
	// A concurrent first append's insert waits for ours, then does nothing.
	row := JobLog{JobID: jobID, CreatedAt: now, UpdatedAt: now}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return JobLog{}, s.rowError(jobID, err)
	}
	q := tx
	if store.Dialect(tx) == store.Postgres {
		q = tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
	}
	var st JobLog
	if err := q.Where("job_id = ?", jobID).Take(&st).Error; err != nil {
		return JobLog{}, fmt.Errorf("logs: lock job %d: %w", jobID, err)
	}
	return st, nil
}

func (s *Service) setState(tx *gorm.DB, jobID, size int64, truncated bool, now time.Time) error {
	err := tx.Model(&JobLog{}).Where("job_id = ?", jobID).
		Updates(map[string]any{"size": size, "truncated": truncated, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("logs: update job %d: %w", jobID, err)
	}
	return nil
}

// insertChunks stores data from offset at on, in rows of at most ChunkSize bytes.
func (s *Service) insertChunks(tx *gorm.DB, jobID, at int64, data []byte) error {
	now := s.clock.Now().UnixMilli()
	chunks := make([]LogChunk, 0, len(data)/s.cfg.ChunkSize+1)
	for len(data) > 0 {
		n := min(len(data), s.cfg.ChunkSize)
		chunks = append(chunks, LogChunk{JobID: jobID, ByteOffset: at, Data: data[:n], ReceivedAt: now})
		at += int64(n)
		data = data[n:]
	}
	if err := tx.Create(&chunks).Error; err != nil {
		return fmt.Errorf("logs: store chunks of job %d: %w", jobID, err)
	}
	return nil
}

// Mark is where a piece of the log starts and when the server received it.
type Mark struct {
	Offset     int64
	ReceivedAt time.Time
}

// maxMarks bounds one answer of Times; a longer log pages with after.
const maxMarks = 5000

// Times lists where each stored piece of the job's log starts and when it was received, from
// byte offset after on (exclusive; -1 for all), at most maxMarks, oldest first. Pieces stored
// before times were kept are left out.
func (s *Service) Times(ctx context.Context, jobID, after int64) ([]Mark, error) {
	var rows []LogChunk
	err := s.db.WithContext(ctx).Model(&LogChunk{}).Select("byte_offset, received_at").
		Where("job_id = ? AND byte_offset > ? AND received_at > 0", jobID, after).Order("byte_offset").Limit(maxMarks).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("logs: times of job %d: %w", jobID, err)
	}
	out := make([]Mark, 0, len(rows))
	for _, r := range rows {
		out = append(out, Mark{Offset: r.ByteOffset, ReceivedAt: time.UnixMilli(r.ReceivedAt).UTC()})
	}
	return out, nil
}

// lastByte returns the last stored byte of a non-empty log (only for the truncation line).
func (s *Service) lastByte(tx *gorm.DB, jobID int64) (byte, error) {
	var c LogChunk
	if err := tx.Where("job_id = ?", jobID).Order("byte_offset DESC").Take(&c).Error; err != nil {
		return 0, fmt.Errorf("logs: last chunk of job %d: %w", jobID, err)
	}
	if len(c.Data) == 0 {
		return '\n', nil
	}
	return c.Data[len(c.Data)-1], nil
}

// Complete marks jobID's log finished: streams send their end event once they have read it all.
// Call it whenever a job reaches a final status, whatever the path (agent report, cancel, reaper).
// It is idempotent.
func (s *Service) Complete(ctx context.Context, jobID int64) error {
	now := s.clock.Now().UTC()
	row := JobLog{JobID: jobID, Complete: true, CreatedAt: now, UpdatedAt: now}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "job_id"}},
		DoUpdates: clause.Assignments(map[string]any{"complete": true, "updated_at": now}),
	}).Create(&row).Error
	if err != nil {
		return s.rowError(jobID, err)
	}
	st, err := s.State(ctx, jobID)
	if err != nil {
		return err
	}
	s.publish(ctx, jobID, st.Size)
	return nil
}

// State returns jobID's log state; a job nothing was logged for yet has a zero state.
func (s *Service) State(ctx context.Context, jobID int64) (JobLog, error) {
	var st JobLog
	err := s.db.WithContext(ctx).Where("job_id = ?", jobID).Take(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return JobLog{JobID: jobID}, nil
	}
	if err != nil {
		return JobLog{}, fmt.Errorf("logs: state of job %d: %w", jobID, err)
	}
	return st, nil
}

// Size returns how many bytes of jobID's log are stored.
func (s *Service) Size(ctx context.Context, jobID int64) (int64, error) {
	st, err := s.State(ctx, jobID)
	return st.Size, err
}

// Read returns up to limit bytes of jobID's log from offset on: fewer at the end of what is
// stored, none past it.
func (s *Service) Read(ctx context.Context, jobID, offset, limit int64) ([]byte, error) {
	if offset < 0 || limit <= 0 {
		return nil, fault.BadRequest("log range must have a non-negative offset and a positive limit")
	}
	end := offset + limit
	// The chunks that overlap [offset, end): from the last one starting at or before offset,
	// found through the primary key, so the query costs the same at any depth of a big log.
	var chunks []LogChunk
	err := s.db.WithContext(ctx).
		Where("job_id = ? AND byte_offset < ?", jobID, end).
		Where("byte_offset >= (SELECT COALESCE(MAX(byte_offset), 0) FROM log_chunks WHERE job_id = ? AND byte_offset <= ?)", jobID, offset).
		Order("byte_offset").Find(&chunks).Error
	if err != nil {
		return nil, fmt.Errorf("logs: read job %d: %w", jobID, err)
	}
	var out []byte
	for _, c := range chunks {
		lo := max(offset-c.ByteOffset, 0)
		hi := min(int64(len(c.Data)), end-c.ByteOffset)
		if lo >= hi {
			continue
		}
		if out == nil && len(chunks) == 1 {
			return c.Data[lo:hi], nil // the common small read: no copy
		}
		out = append(out, c.Data[lo:hi]...)
	}
	return out, nil
}

// rowError turns a failed insert of the job_logs row into an error: a job that does not exist is
// a 404, so an agent API handler can pass it on.
func (s *Service) rowError(jobID int64, err error) error {
	if isForeignKeyViolation(err) {
		return fault.NotFound("job %d not found", jobID)
	}
	return fmt.Errorf("logs: job %d: %w", jobID, err)
}

func isForeignKeyViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23503") || strings.Contains(msg, "FOREIGN KEY constraint failed")
}

// channel is the Redis pub/sub channel of a job's log notifications.
func channel(jobID int64) string { return "nimbus:log:" + strconv.FormatInt(jobID, 10) }

// publish tells every replica's streams that jobID's log changed; the message is the stored size,
// for people debugging with redis-cli: streams re-read the database either way. A failure is only
// logged: the bytes are stored, and streams poll as well.
func (s *Service) publish(ctx context.Context, jobID, size int64) {
	// The bytes are committed: notify even if the caller has gone, but never let a Redis that
	// hangs slow the agent's appends down by more than a moment.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := s.rdb.Publish(ctx, channel(jobID), size).Err(); err != nil {
		s.log.WarnContext(ctx, "log notification not published", "job_id", jobID, "err", err)
	}
}

// watch subscribes to jobID's notifications. The subscription is confirmed before it returns, so
// an append that commits after watch returns is never missed.
func (s *Service) watch(ctx context.Context, jobID int64) (*redis.PubSub, error) {
	sub := s.rdb.Subscribe(ctx, channel(jobID))
	if _, err := sub.Receive(ctx); err != nil {
		sub.Close()
		return nil, fmt.Errorf("logs: subscribe to job %d: %w", jobID, err)
	}
	return sub, nil
}

// truncationLine is written once, after the last byte a capped log keeps.
func truncationLine(maxSize int64) string {
	return "[nimbus] log truncated at " + humanSize(maxSize) + "; the rest of this job's output was dropped\n"
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
