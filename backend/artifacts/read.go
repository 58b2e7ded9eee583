package artifacts

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Reads, listings and deletes. Names that are malformed are answered like names that do not
// exist (404), and every 404 names only what the request named.

func notFound(pkg, version, file string) error {
	name := pkg + "/" + version
	if file != "" {
		name += "/" + file
	}
	return fault.NotFound("artifact %s not found", name)
}

// pkgOf returns the repo's package, or a 404.
func (s *Service) pkgOf(ctx context.Context, repoID int64, name string) (*Package, error) {
	var p Package
	err := s.db.WithContext(ctx).Where("repo_id = ? AND name = ?", repoID, name).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("package %s not found", name)
	}
	return &p, err
}

// versionOf returns a version of the package; "latest" is the newest (the last published).
func (s *Service) versionOf(ctx context.Context, p *Package, version string) (*Version, error) {
	q := s.db.WithContext(ctx).Where("package_id = ?", p.ID)
	if version == Latest {
		q = q.Where("build_scoped = ?", false).Order("id DESC")
	} else {
		q = q.Where("version = ?", version)
	}
	var v Version
	err := q.Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound(p.Name, version, "")
	}
	return &v, err
}

// Resolve returns the file to download (version may be "latest").
func (s *Service) Resolve(ctx context.Context, repoID int64, pkg, version, file string) (*Entry, error) {
	if !validRef(pkg, version, file) {
		return nil, notFound(pkg, version, file)
	}
	p, err := s.pkgOf(ctx, repoID, pkg)
	if err != nil {
		return nil, err
	}
	v, err := s.versionOf(ctx, p, version)
	if err != nil {
		return nil, err
	}
	var f File
	err = s.db.WithContext(ctx).Where("version_id = ? AND name = ?", v.ID, file).Take(&f).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound(pkg, version, file)
	}
	if err != nil {
		return nil, err
	}
	return &Entry{Package: *p, Version: *v, File: f}, nil
}

// PackageInfo is a package with what a listing shows of its versions.
type PackageInfo struct {
	Package
	VersionCount int64
	Latest       string // the newest version's name
}

// Packages returns a page of the repo's packages, oldest first (the cursor is the id).
func (s *Service) Packages(ctx context.Context, repoID int64, page paging.Page) ([]PackageInfo, error) {
	var out []PackageInfo
	err := s.db.WithContext(ctx).Table("artifact_packages k").
		Select("k.*, (SELECT COUNT(*) FROM artifact_versions v WHERE v.package_id = k.id) AS version_count, "+
			"COALESCE((SELECT v.version FROM artifact_versions v WHERE v.package_id = k.id AND v.build_scoped = ? ORDER BY v.id DESC LIMIT 1), '') AS latest", false).
		Where("k.repo_id = ? AND k.id > ? AND k.name <> ?", repoID, page.After, ReleasePackage).Order("k.id").Limit(page.Limit + 1).Scan(&out).Error
	return out, err
}

// VersionInfo is a version with its totals and the name of whoever pushed it.
type VersionInfo struct {
	Version
	FileCount    int64
	Size         int64
	PushedByName string
}

// versionInfos returns versions of a package with their totals, newest first; after > 0 pages
// (versions older than that id), limit <= 0 takes all.
func (s *Service) versionInfos(ctx context.Context, packageID int64, where string, args []any, limit int) ([]VersionInfo, error) {
	q := s.db.WithContext(ctx).Table("artifact_versions v").
		Select("v.*, COUNT(f.id) AS file_count, COALESCE(SUM(f.size), 0) AS size, COALESCE(MAX(u.username), '') AS pushed_by_name").
		Joins("LEFT JOIN artifact_files f ON f.version_id = v.id").
		Joins("LEFT JOIN users u ON u.id = v.pushed_by").
		Where("v.package_id = ?", packageID)
	if where != "" {
		q = q.Where(where, args...)
	}
	q = q.Group("v.id").Order("v.id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var out []VersionInfo
	err := q.Scan(&out).Error
	return out, err
}

// Versions returns a page of a package's versions, newest first (the cursor is the id).
func (s *Service) Versions(ctx context.Context, repoID int64, pkg string, page paging.Page) (*Package, []VersionInfo, error) {
	if !packageRE.MatchString(pkg) {
		return nil, nil, fault.NotFound("package %s not found", pkg)
	}
	p, err := s.pkgOf(ctx, repoID, pkg)
	if err != nil {
		return nil, nil, err
	}
	where, args := "", []any(nil)
	if page.After > 0 {
		where, args = "v.id < ?", []any{page.After}
	}
	vs, err := s.versionInfos(ctx, p.ID, where, args, page.Limit+1)
	return p, vs, err
}

// VersionDetail returns a version (or the newest, for "latest") with its files, by name.
func (s *Service) VersionDetail(ctx context.Context, repoID int64, pkg, version string) (*Package, *VersionInfo, []File, error) {
	if !validRef(pkg, version, "") {
		return nil, nil, nil, notFound(pkg, version, "")
	}
	p, err := s.pkgOf(ctx, repoID, pkg)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := s.versionOf(ctx, p, version)
	if err != nil {
		return nil, nil, nil, err
	}
	vs, err := s.versionInfos(ctx, p.ID, "v.id = ?", []any{v.ID}, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(vs) == 0 {
		return nil, nil, nil, notFound(pkg, version, "") // deleted meanwhile
	}
	var files []File
	if err := s.db.WithContext(ctx).Where("version_id = ?", v.ID).Order("name").Find(&files).Error; err != nil {
		return nil, nil, nil, err
	}
	return p, &vs[0], files, nil
}

// DeleteFile deletes a file; a version left without files goes too, and a package left without
// versions. The bytes stay in the store until the collector finds them unreferenced. Deletes
// name real versions: "latest" is for reads.
func (s *Service) DeleteFile(ctx context.Context, repoID int64, pkg, version, file string) error {
	if version == Latest || !validRef(pkg, version, file) {
		return notFound(pkg, version, file)
	}
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		e, err := s.find(ctx, tx, repoID, pkg, version, file)
		if err != nil {
			return err
		}
		if e == nil {
			return notFound(pkg, version, file)
		}
		if err := tx.Delete(&File{}, e.File.ID).Error; err != nil {
			return err
		}
		return prune(tx, e.Package.ID, e.Version.ID)
	})
}

// DeleteVersion deletes a version and its files (and the package when it was its last).
func (s *Service) DeleteVersion(ctx context.Context, repoID int64, pkg, version string) error {
	if version == Latest || !validRef(pkg, version, "") {
		return notFound(pkg, version, "")
	}
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		found, err := s.deleteVersion(tx, repoID, pkg, version)
		if err == nil && !found {
			return notFound(pkg, version, "")
		}
		return err
	})
}

// deleteVersion deletes a version's files, then the version and its package when emptied, in
// tx; found is false when there is no such version.
func (s *Service) deleteVersion(tx *gorm.DB, repoID int64, pkg, version string) (found bool, err error) {
	var vs []Version
	err = tx.Table("artifact_versions v").Select("v.*").Joins("JOIN artifact_packages k ON k.id = v.package_id").
		Where("k.repo_id = ? AND k.name = ? AND v.version = ?", repoID, pkg, version).Limit(1).Scan(&vs).Error
	if err != nil || len(vs) == 0 {
		return false, err
	}
	return true, dropVersion(tx, vs[0])
}

// dropVersion deletes a version's files, then the version and, when it was its last, its
// package, in tx.
func dropVersion(tx *gorm.DB, v Version) error {
	if err := tx.Where("version_id = ?", v.ID).Delete(&File{}).Error; err != nil {
		return err
	}
	return prune(tx, v.PackageID, v.ID)
}

// prune removes the version when it has no files left, then the package when it has no
// versions left.
func prune(tx *gorm.DB, packageID, versionID int64) error {
	if err := tx.Where("id = ? AND NOT EXISTS (SELECT 1 FROM artifact_files f WHERE f.version_id = ?)", versionID, versionID).
		Delete(&Version{}).Error; err != nil {
		return err
	}
	return tx.Where("id = ? AND NOT EXISTS (SELECT 1 FROM artifact_versions v WHERE v.package_id = ?)", packageID, packageID).
		Delete(&Package{}).Error
}
