package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/migrations"
)

// Migrating a database from zero costs seconds on PostgreSQL and a tenth of one on SQLite, and
// hundreds of tests want a migrated one. So the first caller in any process migrates a template
// once per set of migrations, and every test database is a copy of it: `CREATE DATABASE …
// TEMPLATE` on PostgreSQL, a copied file on SQLite. The template's name carries a hash of the
// migrations, so a new or changed migration builds a new template instead of reusing a stale one.

// templateLockKey is the session advisory lock, taken on the admin database, that lets one
// process of a parallel `go test` build a PostgreSQL template while the others wait for it.
// Advisory locks are scoped to a database, so every process must take it on the same (admin)
// one; it differs from goose's migration lock key.
const templateLockKey int64 = 0x6e696d6275737400 // "nimbus\0\0"

// template is a set of migrations and how to apply them; the tests of this file give their own.
type template struct {
	fsys    fs.FS
	migrate func(ctx context.Context, db *gorm.DB) error
}

// schemaOf is the template of the embedded migrations of a dialect.
func schemaOf(dialect string) (template, error) {
	fsys, err := migrations.FS(dialect)
	if err != nil {
		return template{}, err
	}
	return template{fsys: fsys, migrate: func(ctx context.Context, db *gorm.DB) error {
		_, err := store.Migrate(ctx, db)
		return err
	}}, nil
}

// TemplateKey is the first 16 hex digits of a SHA-256 over the names and contents of the files
// in fsys, in lexical order: it changes whenever a migration is added, renamed or edited.
func TemplateKey(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		// Lengths first, so no two different file sets hash the same bytes.
		fmt.Fprintf(h, "%d:%s%d:", len(path), path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("storetest: hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// ensurePostgresTemplate returns the name of the migrated template database of tm in the cluster
// that admin (a *gorm.DB on the admin database at adminURL) is connected to, building it first
// if no process has. The build runs as <name>_building under templateLockKey and is renamed when
// complete, so a template that exists is whole, and a crashed build is dropped by the next one.
func ensurePostgresTemplate(ctx context.Context, admin *gorm.DB, adminURL string, tm template) (string, error) {
	key, err := TemplateKey(tm.fsys)
	if err != nil {
		return "", err
	}
	name := "tmpl_" + key
	// The common case needs no lock: the template is only ever renamed into place whole.
	if ok, err := databaseExists(ctx, admin, name); err != nil || ok {
		return name, err
	}
	sqlDB, err := admin.DB()
	if err != nil {
		return "", fmt.Errorf("storetest: %w", err)
	}
	// A session lock lives on one connection, so take and release it on the same one.
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return "", fmt.Errorf("storetest: template lock connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("storetest: template lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLockKey)
	// Another process may have built it while this one waited.
	if ok, err := databaseExists(ctx, admin, name); err != nil || ok {
		return name, err
	}
	building := name + "_building"
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + building + " WITH (FORCE)",
		"CREATE DATABASE " + building,
	} {
		if err := admin.WithContext(ctx).Exec(q).Error; err != nil {
			return "", fmt.Errorf("storetest: build template %s: %w", name, err)
		}
	}
	if err := migrateDatabase(ctx, withDatabase(adminURL, building), tm); err != nil {
		return "", fmt.Errorf("storetest: build template %s: %w", name, err)
	}
	// No connections: a stray one (autovacuum, a curious psql) would make every copy fail with
	// "source database is being accessed by other users". Copies do not inherit the flag.
	for _, q := range []string{
		"ALTER DATABASE " + building + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
		"ALTER DATABASE " + building + " RENAME TO " + name,
	} {
		if err := admin.WithContext(ctx).Exec(q).Error; err != nil {
			return "", fmt.Errorf("storetest: build template %s: %w", name, err)
		}
	}
	return name, nil
}

func databaseExists(ctx context.Context, admin *gorm.DB, name string) (bool, error) {
	var n int64
	if err := admin.WithContext(ctx).Raw("SELECT count(*) FROM pg_database WHERE datname = ?", name).Scan(&n).Error; err != nil {
		return false, fmt.Errorf("storetest: look up database %s: %w", name, err)
	}
	return n > 0, nil
}

// migrateDatabase applies tm to the database at dbURL and closes the connection again, which a
// template needs before it can be renamed or copied.
func migrateDatabase(ctx context.Context, dbURL string, tm template) error {
	db, err := store.Open(ctx, dbURL, "")
	if err != nil {
		return err
	}
	err = tm.migrate(ctx, db)
	if cerr := store.Close(db); err == nil {
		err = cerr
	}
	return err
}

// withDatabase is adminURL with its database replaced by name.
func withDatabase(adminURL, name string) string {
	u, err := url.Parse(adminURL)
	if err != nil {
		// The admin URL was already used to connect, so it parses.
		return adminURL
	}
	u.Path = "/" + name
	return u.String()
}

// ensureSQLiteTemplate returns the path of the migrated SQLite template of tm in dir, writing it
// first if no process has: migrated in a scratch dir, written with VACUUM INTO under a name of
// its own, then renamed into place, so a reader never sees half a file and concurrent writers
// simply replace one whole, identical file with another.
func ensureSQLiteTemplate(ctx context.Context, dir string, tm template) (string, error) {
	key, err := TemplateKey(tm.fsys)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "nimbus-storetest-"+key+".db")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("storetest: %w", err)
	}
	scratch, err := os.MkdirTemp(dir, "nimbus-storetest-build-")
	if err != nil {
		return "", fmt.Errorf("storetest: %w", err)
	}
	defer os.RemoveAll(scratch)
	db, err := store.Open(ctx, "", scratch)
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp-" + randomHex(6)
	err = tm.migrate(ctx, db)
	if err == nil {
		// VACUUM INTO writes one compact, consistent file without the WAL beside it.
		err = db.WithContext(ctx).Exec("VACUUM INTO ?", tmp).Error
	}
	if cerr := store.Close(db); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("storetest: build SQLite template: %w", err)
	}
	return path, nil
}

// copyFile copies src to dst, a new file.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
