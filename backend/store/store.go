// Package store opens Nimbus's database (PostgreSQL in production, SQLite for the all-in-one
// mode), applies the embedded migrations and runs transactions. Only stores of the domain
// packages touch gorm; they receive the *gorm.DB that Open returns.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/nimbus-build/nimbus/migrations"
)

// Dialects.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// SQLiteFile is the database file name in the data dir.
const SQLiteFile = "nimbus.db"

// Open connects to databaseURL, or to the SQLite file in dataDir when it is empty, and checks the
// connection.
func Open(ctx context.Context, databaseURL, dataDir string) (*gorm.DB, error) {
	cfg := &gorm.Config{
		// Stores report their own errors with context; gorm's logger would print "record not
		// found" for every ordinary miss.
		Logger:  logger.Discard,
		NowFunc: func() time.Time { return time.Now().UTC() },
		// No model has hooks or associations, so every Create/Update/Delete is one statement
		// and atomic on its own; gorm's default BEGIN/COMMIT around each would triple the
		// round trips on hot paths such as the scheduler's claim. Multi-statement work uses
		// store.Tx explicitly.
		SkipDefaultTransaction: true,
	}
	var (
		db  *gorm.DB
		err error
	)
	if databaseURL == "" {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("store: create data dir: %w", err)
		}
		db, err = gorm.Open(sqlite.Open(SQLiteDSN(filepath.Join(dataDir, SQLiteFile))), cfg)
	} else {
		db, err = gorm.Open(postgres.Open(databaseURL), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if Dialect(db) == SQLite {
		// One writer at a time is SQLite's nature; a small pool with busy_timeout and
		// IMMEDIATE transactions waits for the lock instead of failing with SQLITE_BUSY.
		sqlDB.SetMaxOpenConns(4)
	} else {
		sqlDB.SetMaxOpenConns(25)
		sqlDB.SetMaxIdleConns(10)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	return db, nil
}

// SQLiteDSN is the connection string for a SQLite file: WAL for concurrent readers, a busy
// timeout and immediate transactions so writers queue, and enforced foreign keys.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// Dialect returns Postgres or SQLite.
func Dialect(db *gorm.DB) string {
	if db.Dialector.Name() == "postgres" {
		return Postgres
	}
	return SQLite
}

// Migrate applies every pending migration of db's dialect and returns how many it applied. On
// PostgreSQL a session lock makes concurrent replicas wait for each other instead of racing.
func Migrate(ctx context.Context, db *gorm.DB) (int, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	p, err := newProvider(db, sqlDB)
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: %w", err)
	}
	return len(results), nil
}

// Version returns the current migration version and the newest one embedded.
func Version(ctx context.Context, db *gorm.DB) (current, latest int64, err error) {
	sqlDB, err := db.DB()
	if err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	p, err := newProvider(db, sqlDB)
	if err != nil {
		return 0, 0, err
	}
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("store: version: %w", err)
	}
	sources := p.ListSources()
	if len(sources) > 0 {
		latest = sources[len(sources)-1].Version
	}
	return current, latest, nil
}

func newProvider(db *gorm.DB, sqlDB *sql.DB) (*goose.Provider, error) {
	dialect := Dialect(db)
	fsys, err := migrations.FS(dialect)
	if err != nil {
		return nil, err
	}
	gd := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if dialect == Postgres {
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("store: migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, sqlDB, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// Close closes the underlying connection pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks the database answers within ctx.
func Ping(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// ErrNotFound is returned by stores when a row does not exist.
var ErrNotFound = errors.New("not found")

// Tx runs fn in a transaction: committed when fn returns nil, rolled back otherwise.
func Tx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return db.WithContext(ctx).Transaction(fn)
}

// Lock takes a transaction-scoped named lock, for invariants that span rows ("the first user
// becomes admin", "an org keeps one owner"). PostgreSQL uses an advisory lock released at commit;
// SQLite needs none because its IMMEDIATE transactions already run one writer at a time.
func Lock(tx *gorm.DB, name string) error {
	if Dialect(tx) != Postgres {
		return nil
	}
	return tx.Exec("SELECT pg_advisory_xact_lock(hashtext(?))", name).Error
}

// IsUniqueViolation reports whether err is a unique-constraint violation on either dialect.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23505") || strings.Contains(msg, "UNIQUE constraint failed")
}
