package server

import (
	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/registry"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/scheduler"
)

// Models lists every gorm model of every domain. The schema test checks each against the
// migrated schema of both dialects, so a domain that adds a model adds it here too.
func Models() []any {
	return []any{
		&auth.User{}, &auth.Session{}, &auth.AccessToken{}, &auth.PasswordReset{},
		&org.Org{}, &org.Member{}, &org.Invitation{},
		&billing.Account{}, &billing.Txn{}, &billing.Posting{}, &billing.QuotaUsage{}, &billing.PipelineBilling{}, &billing.Notification{},
		&repo.Repo{}, &repo.Secret{}, &repo.DeployToken{},
		&build.Build{}, &build.Pipeline{}, &build.Stage{}, &build.Job{}, &build.Schedule{},
		&scheduler.Agent{},
		&logs.JobLog{}, &logs.LogChunk{},
		&registry.Repository{}, &registry.Blob{}, &registry.Manifest{}, &registry.ManifestRef{}, &registry.Tag{}, &registry.Upload{},
		&artifacts.Package{}, &artifacts.Version{}, &artifacts.File{},
	}
}
