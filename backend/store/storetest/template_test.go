package storetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

func TestTemplateKeyFollowsTheMigrations(t *testing.T) {
	base := fstest.MapFS{
		"00001_a.sql": {Data: []byte("CREATE TABLE a (id int);")},
		"00002_b.sql": {Data: []byte("CREATE TABLE b (id int);")},
	}
	with := func(edit func(m fstest.MapFS)) fstest.MapFS {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = &fstest.MapFile{Data: v.Data}
		}
		edit(m)
		return m
	}
	key := func(m fstest.MapFS) string {
		t.Helper()
		k, err := TemplateKey(m)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := key(base)
	if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not 16 hex digits", k)
	}
	if again := key(with(func(fstest.MapFS) {})); again != k {
		t.Fatalf("same migrations, key %s then %s", k, again)
	}
	for _, tc := range []struct {
		name string
		edit func(m fstest.MapFS)
	}{
		{"edited", func(m fstest.MapFS) { m["00002_b.sql"].Data = []byte("CREATE TABLE b (id bigint);") }},
		{"added", func(m fstest.MapFS) { m["00003_c.sql"] = &fstest.MapFile{Data: []byte("SELECT 1;")} }},
		{"renamed", func(m fstest.MapFS) { m["00003_b.sql"] = m["00002_b.sql"]; delete(m, "00002_b.sql") }},
		{"removed", func(m fstest.MapFS) { delete(m, "00002_b.sql") }},
		// Name and content move across a file boundary: the same bytes, another file set.
		{"shifted", func(m fstest.MapFS) {
			m["00001_a.sql"].Data = []byte("CREATE TABLE a (id int);00002_b.sql")
			delete(m, "00002_b.sql")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := key(with(tc.edit)); got == k {
				t.Fatalf("key %s did not change", got)
			}
		})
	}
}

func TestEmbeddedMigrationsHaveATemplateKeyPerDialect(t *testing.T) {
	pg, err := schemaOf(store.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	lite, err := schemaOf(store.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := TemplateKey(pg.fsys)
	if err != nil {
		t.Fatal(err)
	}
	kl, err := TemplateKey(lite.fsys)
	if err != nil {
		t.Fatal(err)
	}
	if kp == kl {
		t.Fatalf("both dialects hash to %s", kp)
	}
}

// countingTemplate is a tiny migration set of its own, new in every run (so its template is
// built here, not found from an earlier run), that counts how often it is applied.
func countingTemplate(t *testing.T, dialect string, applied *atomic.Int32) template {
	t.Helper()
	fsys := fstest.MapFS{
		"00001_first.sql": {Data: []byte("-- +goose Up\nCREATE TABLE first (id integer PRIMARY KEY);\n-- run " + randomHex(8) + "\n")},
		"00002_second.sql": {Data: []byte("-- +goose Up\nCREATE TABLE second (id integer PRIMARY KEY);\n" +
			"INSERT INTO second (id) VALUES (42);\n")},
	}
	gd := goose.DialectSQLite3
	if dialect == store.Postgres {
		gd = goose.DialectPostgres
	}
	return template{fsys: fsys, migrate: func(ctx context.Context, db *gorm.DB) error {
		applied.Add(1)
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		p, err := goose.NewProvider(gd, sqlDB, fsys)
		if err != nil {
			return err
		}
		// Slow enough that concurrent callers really overlap the build.
		time.Sleep(200 * time.Millisecond)
		_, err = p.Up(ctx)
		return err
	}}
}

// adminDB connects to the test cluster's admin database.
func adminDB(t *testing.T) (*gorm.DB, string) {
	t.Helper()
	admin := testenv.PostgresURL(t)
	db, err := store.Open(context.Background(), admin, "")
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	t.Cleanup(func() { store.Close(db) })
	return db, admin
}

// dropTemplate removes a template of a test's own once the test ends.
func dropTemplate(t *testing.T, admin *gorm.DB, name string) {
	t.Cleanup(func() {
		admin.Exec("ALTER DATABASE " + name + " WITH IS_TEMPLATE false")
		if err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error; err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
}

func TestPostgresTemplateIsBuiltOnceByConcurrentCallers(t *testing.T) {
	admin, adminURL := adminDB(t)
	ctx := context.Background()
	var applied atomic.Int32
	tm := countingTemplate(t, store.Postgres, &applied)
	key, err := TemplateKey(tm.fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := "tmpl_" + key
	dropTemplate(t, admin, want)

	// Each caller has its own admin pool, as each test process has.
	const callers = 6
	names := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		adb, _ := adminDB(t)
		wg.Go(func() { names[i], errs[i] = ensurePostgresTemplate(ctx, adb, adminURL, tm) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || names[i] != want {
			t.Fatalf("caller %d: %q, %v; want %q", i, names[i], errs[i], want)
		}
	}
	if n := applied.Load(); n != 1 {
		t.Fatalf("the migrations ran %d times, want once", n)
	}
	var dbs []string
	admin.Raw("SELECT datname FROM pg_database WHERE datname LIKE ? ORDER BY datname", want+"%").Scan(&dbs)
	if len(dbs) != 1 || dbs[0] != want {
		t.Fatalf("databases %v, want only %s (no half-built one)", dbs, want)
	}

	// Reused: a later caller finds it without migrating, and a copy carries the schema and rows.
	if name, err := ensurePostgresTemplate(ctx, admin, adminURL, tm); err != nil || name != want {
		t.Fatalf("again: %q, %v", name, err)
	}
	if n := applied.Load(); n != 1 {
		t.Fatalf("the migrations ran %d times after reuse, want once", n)
	}
	copyName := "t_" + randomHex(6)
	if err := admin.Exec("CREATE DATABASE " + copyName + " TEMPLATE " + want).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + copyName + " WITH (FORCE)") })
	db, err := store.Open(ctx, withDatabase(adminURL, copyName), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var id int
	if err := db.Raw("SELECT id FROM second").Scan(&id).Error; err != nil || id != 42 {
		t.Fatalf("copy: id %d, %v", id, err)
	}
}

func TestPostgresTemplateReplacesAHalfBuiltOne(t *testing.T) {
	admin, adminURL := adminDB(t)
	var applied atomic.Int32
	tm := countingTemplate(t, store.Postgres, &applied)
	key, err := TemplateKey(tm.fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := "tmpl_" + key
	dropTemplate(t, admin, want)
	// A build that crashed halfway left its database behind.
	if err := admin.Exec("CREATE DATABASE " + want + "_building").Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + want + "_building WITH (FORCE)") })
	if name, err := ensurePostgresTemplate(context.Background(), admin, adminURL, tm); err != nil || name != want {
		t.Fatalf("%q, %v", name, err)
	}
	var dbs []string
	admin.Raw("SELECT datname FROM pg_database WHERE datname LIKE ? ORDER BY datname", want+"%").Scan(&dbs)
	if len(dbs) != 1 || dbs[0] != want || applied.Load() != 1 {
		t.Fatalf("databases %v after %d builds, want only %s after one", dbs, applied.Load(), want)
	}
}

func TestPostgresURLIsMigratedFromTheTemplate(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, PostgresURL(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	cur, latest, err := store.Version(ctx, db)
	if err != nil || cur != latest || latest < 1 {
		t.Fatalf("version %d of %d, %v", cur, latest, err)
	}
	if n, err := store.Migrate(ctx, db); err != nil || n != 0 {
		t.Fatalf("migrate applied %d, %v; the copy should be complete", n, err)
	}
	// Its own database: a row here is not in the next one.
	if err := db.Exec("INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES ('alice', 'a@example.com', 'x', now(), now())").Error; err != nil {
		t.Fatal(err)
	}
	other := Postgres(t)
	var n int64
	if err := other.Table("users").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("a fresh database has %d users, %v", n, err)
	}
}

func TestEmptyPostgresURLIsEmpty(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, EmptyPostgresURL(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var tables []string
	if err := db.Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	if len(tables) != 0 {
		t.Fatalf("an empty database has tables %v", tables)
	}
}

func TestSQLiteTemplateIsBuiltOnceAndCopied(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var applied atomic.Int32
	tm := countingTemplate(t, store.SQLite, &applied)
	const callers = 4
	paths := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { paths[i], errs[i] = ensureSQLiteTemplate(ctx, dir, tm) })
	}
	wg.Wait()
	key, _ := TemplateKey(tm.fsys)
	want := filepath.Join(dir, "nimbus-storetest-"+key+".db")
	for i := range callers {
		if errs[i] != nil || paths[i] != want {
			t.Fatalf("caller %d: %q, %v; want %q", i, paths[i], errs[i], want)
		}
	}
	// Concurrent first callers in one process (or several) may each write one; what stays is one
	// whole file and no scratch.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != filepath.Base(want) {
		t.Fatalf("dir holds %v, want only %s", entries, filepath.Base(want))
	}
	built := applied.Load()
	if built < 1 {
		t.Fatal("the migrations never ran")
	}
	if p, err := ensureSQLiteTemplate(ctx, dir, tm); err != nil || p != want || applied.Load() != built {
		t.Fatalf("again: %q, %v, %d builds (was %d)", p, err, applied.Load(), built)
	}
	data := t.TempDir()
	if err := copyFile(want, filepath.Join(data, store.SQLiteFile)); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	var id int
	if err := db.Raw("SELECT id FROM second").Scan(&id).Error; err != nil || id != 42 {
		t.Fatalf("copy: id %d, %v", id, err)
	}
}

func TestSQLiteDataDirIsMigrated(t *testing.T) {
	ctx := context.Background()
	dir := SQLiteDataDir(t)
	db, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	cur, latest, err := store.Version(ctx, db)
	if err != nil || cur != latest || latest < 1 {
		t.Fatalf("version %d of %d, %v", cur, latest, err)
	}
	if n, err := store.Migrate(ctx, db); err != nil || n != 0 {
		t.Fatalf("migrate applied %d, %v; the copy should be complete", n, err)
	}
	// Each data dir is its own copy.
	if err := db.Exec("INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES ('alice', 'a@example.com', 'x', ?, ?)", time.Now(), time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := SQLite(t).Table("users").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("a fresh store has %d users, %v", n, err)
	}
	if got := DataDir(t, "postgres://elsewhere/db"); got == "" {
		t.Fatal("no data dir for PostgreSQL")
	} else if _, err := os.Stat(filepath.Join(got, store.SQLiteFile)); err == nil {
		t.Fatal("a PostgreSQL app got a SQLite file")
	}
}
