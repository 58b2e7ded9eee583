package store

import (
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// CheckSchema compares gorm models with the migrated schema of db and describes every
// disagreement: a model table or column the migrations lack, a column the models lack, a type of
// another kind (integer, text, boolean, time, bytes, float), or a NOT NULL mismatch. Migrations
// are the truth about the schema; this catches the model that drifted from them.
func CheckSchema(db *gorm.DB, models ...any) error {
	var problems []string
	tables, err := db.Migrator().GetTables()
	if err != nil {
		return fmt.Errorf("store: list tables: %w", err)
	}
	unclaimed := map[string]bool{}
	for _, t := range tables {
		if !internalTable(t) {
			unclaimed[t] = true
		}
	}
	for _, m := range models {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(m); err != nil {
			return fmt.Errorf("store: parse model %T: %w", m, err)
		}
		table := stmt.Schema.Table
		if !unclaimed[table] {
			problems = append(problems, fmt.Sprintf("model %T: table %q is not created by any migration (or is claimed twice)", m, table))
			continue
		}
		delete(unclaimed, table)
		cols, err := db.Migrator().ColumnTypes(m)
		if err != nil {
			return fmt.Errorf("store: columns of %s: %w", table, err)
		}
		byName := map[string]gorm.ColumnType{}
		for _, c := range cols {
			byName[c.Name()] = c
		}
		for _, f := range stmt.Schema.Fields {
			if f.DBName == "" {
				continue
			}
			c, ok := byName[f.DBName]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: field %s of %T has no column", table, f.DBName, f.Name, m))
				continue
			}
			delete(byName, f.DBName)
			want := fieldKind(f)
			got := columnKind(c.DatabaseTypeName())
			if want != got {
				problems = append(problems, fmt.Sprintf("%s.%s: model kind %s (%s), column type %s (%s)", table, f.DBName, want, f.DataType, got, c.DatabaseTypeName()))
			}
			if nullable, ok := c.Nullable(); ok && !f.PrimaryKey && nullable == f.NotNull {
				problems = append(problems, fmt.Sprintf("%s.%s: model NOT NULL=%v, column nullable=%v", table, f.DBName, f.NotNull, nullable))
			}
		}
		for name := range byName {
			problems = append(problems, fmt.Sprintf("%s.%s: column has no field in %T", table, name, m))
		}
	}
	for t := range unclaimed {
		problems = append(problems, fmt.Sprintf("table %q has no model", t))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("schema and models disagree on %s:\n  %s", Dialect(db), strings.Join(problems, "\n  "))
	}
	return nil
}

func internalTable(name string) bool {
	return name == "goose_db_version" || strings.HasPrefix(name, "sqlite_")
}

// fieldKind is the kind of column a model field needs.
func fieldKind(f *schema.Field) string {
	switch f.DataType {
	case schema.Bool:
		return "boolean"
	case schema.Int, schema.Uint:
		return "integer"
	case schema.Float:
		return "float"
	case schema.String:
		return "text"
	case schema.Time:
		return "time"
	case schema.Bytes:
		return "bytes"
	}
	return columnKind(string(f.DataType)) // custom types declare their SQL type
}

// columnKind folds the database type names of both dialects into kinds.
func columnKind(dbType string) string {
	t := strings.ToUpper(dbType)
	switch {
	case strings.Contains(t, "INT") || strings.Contains(t, "SERIAL"):
		return "integer"
	case t == "BOOL" || t == "BOOLEAN":
		return "boolean"
	case strings.Contains(t, "TIME") || t == "DATE":
		return "time"
	case t == "BYTEA" || t == "BLOB":
		return "bytes"
	case t == "REAL" || strings.Contains(t, "DOUBLE") || strings.Contains(t, "FLOAT") || strings.Contains(t, "NUMERIC") || strings.Contains(t, "DECIMAL"):
		return "float"
	case strings.Contains(t, "CHAR") || t == "TEXT" || t == "JSON" || t == "JSONB" || t == "UUID":
		return "text"
	}
	return "unknown:" + t
}
