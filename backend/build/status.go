package build

import (
	"time"

	"gorm.io/gorm"
)

// Terminal reports whether a status is final.
func Terminal(status string) bool {
	switch status {
	case StatusSuccess, StatusFailed, StatusCancelled, StatusTerminated, StatusSkipped:
		return true
	}
	return false
}

// refreshStatus recomputes a build's status from its pipelines inside tx: queued while all wait,
// running once one runs, and when all are final: failed if one failed, else terminated if one
// was terminated, else cancelled if one was cancelled, else success (skipped pipelines count as
// success). It only ever moves a build forward.
//
// The build's row is locked first (a no-op UPDATE): two pipelines of one build that end at the
// same moment, reported to different replicas, would otherwise each read the other as still
// running and leave the build running forever. The second waits for the first to commit and then
// reads both final statuses (each statement of a READ COMMITTED transaction sees what committed
// before it).
func refreshStatus(tx *gorm.DB, buildID int64, now time.Time) error {
	if err := tx.Exec("UPDATE builds SET updated_at = updated_at WHERE id = ?", buildID).Error; err != nil {
		return err
	}
	var statuses []string
	if err := tx.Model(&Pipeline{}).Where("build_id = ?", buildID).Pluck("status", &statuses).Error; err != nil {
		return err
	}
	count := map[string]int{}
	for _, st := range statuses {
		count[st]++
	}
	next := StatusQueued
	switch {
	case len(statuses) == 0:
		return nil
	case count[StatusQueued]+count[StatusRunning] > 0:
		if count[StatusQueued] == len(statuses) {
			return nil
		}
		next = StatusRunning
	case count[StatusFailed] > 0:
		next = StatusFailed
	case count[StatusTerminated] > 0:
		next = StatusTerminated
	case count[StatusCancelled] > 0:
		next = StatusCancelled
	default:
		next = StatusSuccess
	}
	q := tx.Model(&Build{}).Where("id = ?", buildID)
	if next == StatusRunning {
		return q.Where("status = ?", StatusQueued).
			Updates(map[string]any{"status": next, "started_at": now, "updated_at": now}).Error
	}
	return q.Where("status IN ?", []string{StatusQueued, StatusRunning}).
		Updates(map[string]any{"status": next, "finished_at": now, "updated_at": now}).Error
}

// settleStage finishes a stage once none of its jobs is queued or running: failed if one failed,
// else cancelled if one was cancelled, else skipped if none ran, else success.
func settleStage(tx *gorm.DB, stageID int64, now time.Time) error {
	var statuses []string
	if err := tx.Model(&Job{}).Where("stage_id = ?", stageID).Pluck("status", &statuses).Error; err != nil {
		return err
	}
	// A stage none of whose jobs ran (each skipped: by its condition, or because the pipeline
	// ended before it, refused at its claim) is skipped, not a success.
	final, skipped := StatusSuccess, 0
	for _, st := range statuses {
		switch st {
		case StatusSkipped:
			skipped++
		case StatusQueued, StatusRunning:
			return nil
		case StatusFailed:
			final = StatusFailed
		case StatusCancelled:
			if final != StatusFailed {
				final = StatusCancelled
			}
		}
	}
	if skipped > 0 && skipped == len(statuses) {
		final = StatusSkipped
	}
	return tx.Model(&Stage{}).Where("id = ? AND status IN ?", stageID, []string{StatusQueued, StatusRunning}).
		Updates(map[string]any{"status": final, "finished_at": now}).Error
}
