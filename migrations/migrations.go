// Package migrations embeds Nimbus's versioned SQL migrations, one folder per dialect
// (postgres/, sqlite/), applied by goose on server start and by `nimbus-server migrate`.
//
// Rules: a migration is never edited once it has landed; each change is a new numbered file in
// BOTH folders with the same number and meaning; every gorm model must match the migrated schema
// (backend/server's schema test fails otherwise).
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// FS returns the migrations of a dialect ("postgres" or "sqlite").
func FS(dialect string) (fs.FS, error) {
	switch dialect {
	case "postgres", "sqlite":
		return fs.Sub(files, dialect)
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
}
