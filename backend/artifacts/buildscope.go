package artifacts

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Build-scoped versions carry files between the pipelines of one build, which run on different
// nodes with separate workspaces (the brief's CPU → GPU → CPU training): a job pushes
// `processed.tgz` to version $CNB_BUILD_ID of a package, a job of another pipeline of the same
// build, told by cnb:await that it is there, pulls it. Such a version:
//
//   - is named nimbus-<build id>, the build's CNB_BUILD_ID. Only jobs of that build (their
//     CNB_TOKEN) push to it; the name is refused to everyone else, so nobody slips a file into
//     another build's hand-off;
//   - takes files from every pipeline of the build (other versions only from the pipeline that
//     made them), still immutable file by file;
//   - is never "latest": a package's latest stays the newest published model;
//   - is removed by the collector once its build has ended longer ago than the retention
//     (NIMBUS_BUILD_ARTIFACT_RETENTION, 7 days by default); its blobs then go with the next
//     collection that finds them unreferenced.
//
// Reads are as for any version: reporter and deploy tokens can pull them while they last.

// DefaultBuildRetention is how long a build's hand-off versions outlive the build.
const DefaultBuildRetention = 7 * 24 * time.Hour

// buildScoped says whether an upload to version goes to a build's hand-off version, and
// refuses one that names another build's (or comes from no build at all).
func buildScoped(version string, pr producer) (bool, error) {
	id, ok := build.ParseBuildID(version)
	if !ok {
		return false, nil
	}
	if pr.BuildID == nil || *pr.BuildID != id {
		return false, scopeError(version, id)
	}
	return true, nil
}

func scopeError(version string, buildID int64) error {
	return fault.Forbidden("version %s is the hand-off space of build %d: only the jobs of that build push to it, with their CNB_TOKEN", version, buildID)
}

// expireBuildVersions removes the build-scoped versions whose build ended before cutoff (or is
// gone), at most 1000 a call, each with its files and, when it was the last, its package. Which
// builds ended is build's to say: the builds holding hand-off versions are asked about 500 at a
// time.
func (c *Collector) expireBuildVersions(ctx context.Context, cutoff time.Time) (int, error) {
	const limit, page = 1000, 500
	var expired []int64
	for after := int64(0); len(expired) < limit; {
		var ids []int64
		if err := c.db.WithContext(ctx).Model(&Version{}).Distinct().
			Where("build_scoped = ? AND build_id > ?", true, after).Order("build_id").Limit(page).Pluck("build_id", &ids).Error; err != nil {
			return 0, fmt.Errorf("artifacts: builds with hand-off versions: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		ended, err := c.builds.BuildsEndedBefore(ctx, ids, cutoff)
		if err != nil {
			return 0, fmt.Errorf("artifacts: expired build versions: %w", err)
		}
		expired = append(expired, ended...)
	}
	var vs []Version
	err := c.db.WithContext(ctx).Where("build_scoped = ? AND (build_id IS NULL OR build_id IN ?)", true, expired).
		Order("id").Limit(limit).Find(&vs).Error
	if err != nil {
		return 0, fmt.Errorf("artifacts: expired build versions: %w", err)
	}
	for _, v := range vs {
		err := store.Tx(ctx, c.db, func(tx *gorm.DB) error { return dropVersion(tx, v) })
		if err != nil {
			return 0, fmt.Errorf("artifacts: expire version %s: %w", v.Version, err)
		}
		c.log.Info("build artifacts expired", "version", v.Version, "package_id", v.PackageID)
	}
	return len(vs), nil
}
