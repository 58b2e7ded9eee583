package artifacts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/opencontainers/go-digest"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// MaxFilesPerVersion bounds a version, so that its listing is one answer.
const MaxFilesPerVersion = 1000

// Service holds the logic of the generic files.
type Service struct {
	db     *gorm.DB
	store  storage.Store
	blobs  *Blobs
	builds Builds
	clock  clock.Clock
	log    *slog.Logger
}

// NewService returns the files service.
func NewService(db *gorm.DB, st storage.Store, blobs *Blobs, builds Builds, clk clock.Clock, log *slog.Logger) *Service {
	return &Service{db: db, store: st, blobs: blobs, builds: builds, clock: clk, log: log}
}

// Builds is what artifacts read of build's tables, through package build: the build a pipeline
// belongs to (the provenance of what it publishes), the repo of a pipeline, and which builds'
// hand-off versions have outlived their retention.
type Builds interface {
	ProducerOf(ctx context.Context, pipelineID int64) (build.Producer, error)
	RepoOfPipeline(ctx context.Context, id int64) (repoID int64, found bool, err error)
	BuildsEndedBefore(ctx context.Context, ids []int64, cutoff time.Time) ([]int64, error)
}

// Upload is one file upload.
type Upload struct {
	Package, Version, File string
	// Digest is the checksum the client sent ("" when none): the bytes must match it, and an
	// upload of a file that exists is answered without reading the body.
	Digest digest.Digest
	Size   int64 // Content-Length, or -1 when unknown
	Body   io.Reader
}

// producer is who pushes: a pipeline (with its build and commit) or a person.
type producer struct {
	PipelineID, BuildID, BuildNumber *int64
	Commit                           string
	UserID                           *int64
	Scoped                           bool // the upload goes to its build's own version
}

// producerOf finds the pipeline, build and commit of a job token; other callers are people.
func (s *Service) producerOf(ctx context.Context, p *auth.Principal) (producer, error) {
	var pr producer
	if id := p.UserID(); id != 0 {
		pr.UserID = &id
	}
	if p.Kind != auth.KindJob || p.PipelineID == 0 {
		return pr, nil
	}
	b, err := s.builds.ProducerOf(ctx, p.PipelineID)
	if err != nil {
		return pr, fmt.Errorf("artifacts: the job token's build: %w", err)
	}
	pr.PipelineID, pr.BuildID, pr.BuildNumber, pr.Commit = &b.PipelineID, &b.BuildID, &b.BuildNumber, b.CommitSHA
	return pr, nil
}

// sameProducer reports whether pr may add files to v: the pipeline that made it, or people
// when people made it, or for a build-scoped version any pipeline of its build. A version's
// provenance stays true that way.
func sameProducer(v *Version, pr producer) bool {
	if v.BuildScoped {
		return v.BuildID != nil && pr.BuildID != nil && *v.BuildID == *pr.BuildID
	}
	if v.PipelineID == nil || pr.PipelineID == nil {
		return v.PipelineID == nil && pr.PipelineID == nil
	}
	return *v.PipelineID == *pr.PipelineID
}

func producerConflict(v *Version) error {
	if v.BuildScoped && v.BuildID != nil {
		return scopeError(v.Version, *v.BuildID)
	}
	if v.PipelineID != nil {
		return fault.Conflict("version %s was published by pipeline %d; only that pipeline adds files to it", v.Version, *v.PipelineID)
	}
	return fault.Conflict("version %s was published by a person; a pipeline cannot add files to it", v.Version)
}

// Entry is a file with its version and package.
type Entry struct {
	Package Package
	Version Version
	File    File
}

// entryRow is what find scans: the three rows side by side.
type entryRow struct {
	PackageID       int64
	PackageName     string
	VersionID       int64
	VersionName     string
	VersionPipeline *int64
	FileID          int64
	FileName        string
	FileDigest      string
	FileSize        int64
}

// find returns a file of the repo, or nil. version is a real version, not "latest".
func (s *Service) find(ctx context.Context, db *gorm.DB, repoID int64, pkg, version, file string) (*Entry, error) {
	var rows []entryRow
	err := db.WithContext(ctx).Table("artifact_files f").
		Select("k.id AS package_id, k.name AS package_name, v.id AS version_id, v.version AS version_name, "+
			"v.pipeline_id AS version_pipeline, f.id AS file_id, f.name AS file_name, f.digest AS file_digest, f.size AS file_size").
		Joins("JOIN artifact_versions v ON v.id = f.version_id").
		Joins("JOIN artifact_packages k ON k.id = v.package_id").
		Where("k.repo_id = ? AND k.name = ? AND v.version = ? AND f.name = ?", repoID, pkg, version, file).
		Limit(1).Scan(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	r := rows[0]
	return &Entry{
		Package: Package{ID: r.PackageID, RepoID: repoID, Name: r.PackageName},
		Version: Version{ID: r.VersionID, PackageID: r.PackageID, Version: r.VersionName, PipelineID: r.VersionPipeline},
		File:    File{ID: r.FileID, VersionID: r.VersionID, Name: r.FileName, Digest: r.FileDigest, Size: r.FileSize},
	}, nil
}

// Put stores an uploaded file. It answers created=false (and stores nothing) when the file
// exists with the same content, and a 409 when it exists with other content: published files
// never change until they are deleted. The body streams into the store; nothing is kept when
// it does not match the client's checksum (400) or passes the team's quota (413).
func (s *Service) Put(ctx context.Context, a *repo.Access, p *auth.Principal, up Upload) (*Entry, bool, error) {
	if err := checkNames(up.Package, up.Version, up.File); err != nil {
		return nil, false, err
	}
	pr, err := s.producerOf(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if pr.Scoped, err = buildScoped(up.Version, pr); err != nil {
		return nil, false, err
	}
	e, created, err := s.put(ctx, a, pr, up)
	if err == nil && pr.PipelineID != nil {
		s.used(ctx, *pr.PipelineID, UsePush, a.Repo.ID, e)
	}
	return e, created, err
}

// put is Put once the names are checked and the producer known.
func (s *Service) put(ctx context.Context, a *repo.Access, pr producer, up Upload) (*Entry, bool, error) {
	cur, err := s.find(ctx, s.db, a.Repo.ID, up.Package, up.Version, up.File)
	if err != nil {
		return nil, false, err
	}
	if cur != nil {
		return cur, false, sameContent(cur, up)
	}
	if err := s.checkVersion(ctx, a.Repo.ID, up, pr); err != nil {
		return nil, false, err
	}
	room, err := s.blobs.Room(ctx, a.Org.ID, up.Digest)
	if err != nil {
		return nil, false, err
	}
	if room >= 0 && up.Size > room {
		return nil, false, quotaError(s.blobs.quota, room)
	}
	info, err := s.receive(ctx, up, QuotaReader(bodyReader{up.Body}, room))
	if err != nil {
		return nil, false, s.uploadError(err, up, room)
	}
	var e *Entry
	created := false
	err = s.blobs.Link(ctx, info.Digest, func(tx *gorm.DB) error {
		e, created, err = s.record(tx, a.Repo.ID, up, info, pr)
		return err
	})
	if errors.Is(err, ErrBlobGone) {
		return nil, false, fault.Unavailable("%v", err)
	}
	return e, created, err
}

// sameContent decides an upload to an existing file: the same bytes are a no-op, other bytes a
// conflict. Without the client's checksum the body is hashed (never stored), up to one byte more
// than the file has.
func sameContent(cur *Entry, up Upload) error {
	conflict := fault.Conflict("%s/%s/%s exists with other content (%s); published files never change: delete it first or publish a new version",
		up.Package, up.Version, up.File, cur.File.Digest)
	if up.Digest != "" {
		if string(up.Digest) != cur.File.Digest {
			return conflict
		}
		return nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(up.Body, cur.File.Size+1))
	if err != nil {
		return fault.BadRequest("the upload was cut off: %v", err)
	}
	if n != cur.File.Size || digest.NewDigest(digest.SHA256, h) != digest.Digest(cur.File.Digest) {
		return conflict
	}
	return nil
}

// checkVersion refuses early what record would refuse after the upload: a version of another
// producer, or a full one.
func (s *Service) checkVersion(ctx context.Context, repoID int64, up Upload, pr producer) error {
	var vs []Version
	err := s.db.WithContext(ctx).Table("artifact_versions v").Select("v.*").
		Joins("JOIN artifact_packages k ON k.id = v.package_id").
		Where("k.repo_id = ? AND k.name = ? AND v.version = ?", repoID, up.Package, up.Version).Limit(1).Scan(&vs).Error
	if err != nil || len(vs) == 0 {
		return err
	}
	if !sameProducer(&vs[0], pr) {
		return producerConflict(&vs[0])
	}
	return s.checkRoom(s.db.WithContext(ctx), vs[0].ID)
}

func (s *Service) checkRoom(db *gorm.DB, versionID int64) error {
	var n int64
	if err := db.Model(&File{}).Where("version_id = ?", versionID).Count(&n).Error; err != nil {
		return err
	}
	if n >= MaxFilesPerVersion {
		return fault.Conflict("a version holds at most %d files", MaxFilesPerVersion)
	}
	return nil
}

// receive streams the body into the store: with Put when the digest is known (the store
// verifies it), else through an upload session, hashing on the way, committed under the digest
// that came out.
func (s *Service) receive(ctx context.Context, up Upload, body io.Reader) (storage.Info, error) {
	if up.Digest != "" {
		return s.store.Put(ctx, up.Digest, up.Size, body)
	}
	id, err := s.store.CreateUpload(ctx)
	if err != nil {
		return storage.Info{}, err
	}
	h := sha256.New()
	n, err := s.store.Append(ctx, id, 0, io.TeeReader(body, h))
	if err == nil && up.Size >= 0 && n != up.Size {
		err = fmt.Errorf("%w: got %d bytes, want %d", storage.ErrSizeMismatch, n, up.Size)
	}
	if err != nil {
		// A fresh context: the request's may be what ended.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		s.store.AbortUpload(actx, id)
		return storage.Info{}, err
	}
	return s.store.Commit(ctx, id, digest.NewDigest(digest.SHA256, h))
}

// bodyError marks a failure to read the client's body (it went away, or sent less than it
// announced), as opposed to a failure of the store.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read the upload: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err}
	}
	return n, err
}

// uploadError turns a failed receive into its answer.
func (s *Service) uploadError(err error, up Upload, room int64) error {
	var be *bodyError
	switch {
	case errors.Is(err, ErrQuota):
		return quotaError(s.blobs.quota, room)
	case errors.Is(err, storage.ErrDigestMismatch):
		return fault.BadRequest("the content does not match its checksum %s; nothing was kept", up.Digest)
	case errors.Is(err, storage.ErrSizeMismatch):
		return fault.BadRequest("the body does not match Content-Length; nothing was kept")
	case errors.As(err, &be):
		return fault.BadRequest("the upload was cut off (%v); nothing was kept", be.err)
	}
	return err
}

func quotaError(quota, room int64) error {
	return fault.TooLarge(
		"the team's storage quota of %d bytes leaves room for %d more; nothing was kept", quota, room)
}

// record makes the package, the version and the file rows of a stored upload, in tx (under the
// blob's lock). A concurrent upload of the same file may have won: the same content is then a
// no-op, other content a conflict.
func (s *Service) record(tx *gorm.DB, repoID int64, up Upload, info storage.Info, pr producer) (*Entry, bool, error) {
	now := s.clock.Now().UTC()
	pkg := Package{RepoID: repoID, Name: up.Package, CreatedAt: now, UpdatedAt: now}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&pkg).Error; err != nil {
		return nil, false, err
	}
	if err := tx.Where("repo_id = ? AND name = ?", repoID, up.Package).Take(&pkg).Error; err != nil {
		return nil, false, err
	}
	ver := Version{PackageID: pkg.ID, Version: up.Version, PipelineID: pr.PipelineID, BuildID: pr.BuildID,
		BuildNumber: pr.BuildNumber, CommitSHA: pr.Commit, PushedBy: pr.UserID, BuildScoped: pr.Scoped, CreatedAt: now}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&ver)
	if res.Error != nil {
		return nil, false, res.Error
	}
	if res.RowsAffected == 1 {
		if err := tx.Model(&pkg).Update("updated_at", now).Error; err != nil {
			return nil, false, err
		}
		if err := enqueuePublish(tx, repoID, pkg.Name, &ver, now); err != nil {
			return nil, false, err
		}
	}
	if err := tx.Where("package_id = ? AND version = ?", pkg.ID, up.Version).Take(&ver).Error; err != nil {
		return nil, false, err
	}
	if !sameProducer(&ver, pr) {
		return nil, false, producerConflict(&ver)
	}
	if err := s.checkRoom(tx, ver.ID); err != nil {
		return nil, false, err
	}
	f := File{VersionID: ver.ID, Name: up.File, Digest: string(info.Digest), Size: info.Size, CreatedAt: now}
	res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&f)
	if res.Error != nil {
		return nil, false, res.Error
	}
	created := res.RowsAffected == 1
	if !created {
		if err := tx.Where("version_id = ? AND name = ?", ver.ID, up.File).Take(&f).Error; err != nil {
			return nil, false, err
		}
		if f.Digest != string(info.Digest) {
			return nil, false, fault.Conflict("%s/%s/%s was published meanwhile with other content (%s)", up.Package, up.Version, up.File, f.Digest)
		}
	}
	return &Entry{Package: pkg, Version: ver, File: f}, created, nil
}
