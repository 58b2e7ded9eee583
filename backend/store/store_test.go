package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

func TestMigrateIsIdempotentOnBothDialects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		// storetest already migrated; a second run must apply nothing and leave the version.
		n, err := store.Migrate(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("second migrate applied %d migrations", n)
		}
		cur, latest, err := store.Version(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if cur != latest || latest < 1 {
			t.Fatalf("version %d, latest %d", cur, latest)
		}
		if err := store.Ping(ctx, db); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFreshDatabaseMigratesFromZero(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *gorm.DB
	}{
		{store.SQLite, func(t *testing.T) *gorm.DB {
			db, err := store.Open(ctx, "", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
		{store.Postgres, func(t *testing.T) *gorm.DB {
			db, err := store.Open(ctx, storetest.EmptyPostgresURL(t), "")
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.open(t)
			defer store.Close(db)
			if got := store.Dialect(db); got != tc.name {
				t.Fatalf("dialect %q", got)
			}
			n, err := store.Migrate(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			_, latest, _ := store.Version(ctx, db)
			if int64(n) != latest {
				t.Fatalf("applied %d of %d migrations", n, latest)
			}
		})
	}
}

func TestOpenReportsUnreachableDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", "")
	if err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
}

func TestTxRollsBackOnError(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		now := time.Now()
		err := store.Tx(ctx, db, func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
				"alice", "a@example.com", "x", now, now).Error; err != nil {
				return err
			}
			return gorm.ErrInvalidData
		})
		if err == nil {
			t.Fatal("Tx swallowed the error")
		}
		var n int64
		db.Table("users").Count(&n)
		if n != 0 {
			t.Fatalf("rolled-back insert is visible: %d rows", n)
		}
	})
}
