// Package storetest gives tests a fully migrated database of each dialect: a SQLite file in a
// temp dir, and a fresh PostgreSQL database created in the throwaway cluster that `make test`
// starts (dropped again when the test ends). Stores are tested against these real databases,
// never against mocks.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// SQLite returns a migrated SQLite database in a temp dir.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	if _, err := store.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// PostgresURL creates an empty database in the test cluster and returns its URL; the database is
// dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin := testenv.PostgresURL(t)
	ctx := context.Background()
	adb, err := store.Open(ctx, admin, "")
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	if err := adb.Exec("CREATE DATABASE " + name).Error; err != nil {
		store.Close(adb)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adb.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		store.Close(adb)
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Postgres returns a migrated, empty PostgreSQL database of its own.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := store.Open(context.Background(), PostgresURL(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(db) })
	if _, err := store.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Each runs fn as a subtest against a fresh database of every dialect.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Run(store.SQLite, func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run(store.Postgres, func(t *testing.T) { fn(t, Postgres(t)) })
}
