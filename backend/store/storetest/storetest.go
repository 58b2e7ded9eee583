// Package storetest gives tests a fully migrated database of each dialect: a SQLite file in a
// temp dir, and a fresh PostgreSQL database created in the throwaway cluster that `make test`
// starts (dropped again when the test ends). Stores are tested against these real databases,
// never against mocks. Both are copies of a template migrated once (template.go); the tests of
// migrating from zero ask for an empty database instead (EmptyPostgresURL).
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// SQLite returns a migrated SQLite database in a temp dir.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), "", SQLiteDataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db
}

// SQLiteDataDir returns a temp data dir whose SQLite file (store.SQLiteFile) is already migrated,
// for tests that start the whole app on SQLite: its migrate step then finds nothing to apply.
func SQLiteDataDir(t testing.TB) string {
	t.Helper()
	tm, err := schemaOf(store.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ensureSQLiteTemplate(context.Background(), os.TempDir(), tm)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := copyFile(src, filepath.Join(dir, store.SQLiteFile)); err != nil {
		t.Fatalf("storetest: copy SQLite template: %v", err)
	}
	return dir
}

// DataDir is the data dir for an app on databaseURL: a migrated SQLite one when it is empty, an
// empty temp dir otherwise.
func DataDir(t testing.TB, databaseURL string) string {
	t.Helper()
	if databaseURL == "" {
		return SQLiteDataDir(t)
	}
	return t.TempDir()
}

// PostgresURL creates a migrated database of its own in the test cluster and returns its URL; the
// database is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return postgresURL(t, true)
}

// EmptyPostgresURL is PostgresURL without the migrations, for the tests of migrating from zero.
func EmptyPostgresURL(t testing.TB) string {
	t.Helper()
	return postgresURL(t, false)
}

func postgresURL(t testing.TB, migrated bool) string {
	t.Helper()
	admin := testenv.PostgresURL(t)
	ctx := context.Background()
	adb, err := store.Open(ctx, admin, "")
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	name := "t_" + randomHex(6)
	create := "CREATE DATABASE " + name
	if migrated {
		tm, err := schemaOf(store.Postgres)
		if err != nil {
			store.Close(adb)
			t.Fatal(err)
		}
		tmpl, err := ensurePostgresTemplate(ctx, adb, admin, tm)
		if err != nil {
			store.Close(adb)
			t.Fatal(err)
		}
		create += " TEMPLATE " + tmpl
	}
	if err := adb.Exec(create).Error; err != nil {
		store.Close(adb)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adb.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		store.Close(adb)
	})
	return withDatabase(admin, name)
}

// Postgres returns a migrated, empty PostgreSQL database of its own.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), PostgresURL(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db
}

// Each runs fn as a subtest against a fresh database of every dialect.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Run(store.SQLite, func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run(store.Postgres, func(t *testing.T) { fn(t, Postgres(t)) })
}
