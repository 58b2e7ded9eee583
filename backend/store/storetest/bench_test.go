package storetest

import (
	"context"
	"testing"

	"github.com/nimbus-build/nimbus/backend/store"
)

// The setup cost of one database, from zero (what every test paid before the templates) and as
// a copy of the template; run with -benchtime=10x, as each iteration keeps its database until
// the benchmark ends.

func BenchmarkPostgresFromZero(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		db, err := store.Open(ctx, EmptyPostgresURL(b), "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Migrate(ctx, db); err != nil {
			b.Fatal(err)
		}
		store.Close(db)
	}
}

func BenchmarkPostgresFromTemplate(b *testing.B) {
	PostgresURL(b) // the template, built once outside the timing
	for b.Loop() {
		store.Close(Postgres(b))
	}
}

func BenchmarkSQLiteFromZero(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		db, err := store.Open(ctx, "", b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Migrate(ctx, db); err != nil {
			b.Fatal(err)
		}
		store.Close(db)
	}
}

func BenchmarkSQLiteFromTemplate(b *testing.B) {
	SQLiteDataDir(b)
	for b.Loop() {
		store.Close(SQLite(b))
	}
}
