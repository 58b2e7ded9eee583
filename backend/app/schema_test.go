package app

import (
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/outbox"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/registry"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// models lists every gorm model of every domain; a domain that adds a model adds it here, and
// the test below checks each against the migrated schema of both dialects.
func models() []any {
	return []any{
		&auth.User{}, &auth.Session{}, &auth.AccessToken{}, &auth.PasswordReset{},
		&org.Org{}, &org.Member{}, &org.Invitation{},
		&billing.Account{}, &billing.Txn{}, &billing.Posting{}, &billing.QuotaUsage{}, &billing.PipelineBilling{}, &billing.Notification{},
		&repo.Repo{}, &repo.Secret{}, &repo.DeployToken{}, &repo.SecretFile{}, &repo.SecretFileRead{},
		&pull.Request{}, &pull.Review{}, &pull.Rule{}, &pull.Settings{}, &pull.Comment{}, &pull.Reviewer{},
		&build.Build{}, &build.Pipeline{}, &build.Stage{}, &build.Job{}, &build.Metric{}, &build.Schedule{}, &build.BuildKey{}, &build.BuildWait{}, &build.CommitStatus{},
		&scheduler.Agent{}, &scheduler.RunnerToken{}, &scheduler.RegistrationToken{},
		&logs.JobLog{}, &logs.LogChunk{},
		&registry.Repository{}, &registry.Blob{}, &registry.Manifest{}, &registry.ManifestRef{}, &registry.Tag{}, &registry.Upload{},
		&artifacts.Package{}, &artifacts.Version{}, &artifacts.File{}, &artifacts.Release{}, &artifacts.Use{}, &artifacts.PublishHook{}, &artifacts.PublishDelivery{},
		&outbox.Message{},
	}
}

// TestModelsMatchMigratedSchema is the guard between gorm models and the SQL migrations: every
// model's table and columns exist with the right kind and nullability on both dialects, and no
// migrated table or column lacks a model. store's own tests prove the check fails on drift.
func TestModelsMatchMigratedSchema(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		if err := store.CheckSchema(db, models()...); err != nil {
			t.Fatal(err)
		}
	})
}
