package store_test

import (
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// These models deliberately disagree with the migrated users table, to prove CheckSchema fails.
type driftedExtraField struct {
	ID           int64
	Username     string    `gorm:"not null"`
	Email        string    `gorm:"not null"`
	PasswordHash string    `gorm:"not null"`
	IsAdmin      bool      `gorm:"not null"`
	Nickname     string    // no such column
	CreatedAt    time.Time `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

func (driftedExtraField) TableName() string { return "users" }

type driftedKind struct {
	ID           int64
	Username     string    `gorm:"not null"`
	Email        string    `gorm:"not null"`
	PasswordHash string    `gorm:"not null"`
	IsAdmin      string    `gorm:"not null"` // boolean column
	CreatedAt    time.Time `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

func (driftedKind) TableName() string { return "users" }

type driftedMissingColumn struct {
	ID        int64
	Username  string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

func (driftedMissingColumn) TableName() string { return "users" }

type driftedNullability struct {
	ID           int64
	Username     string    `gorm:"not null"`
	Email        *string   // nullable in the model, NOT NULL in the schema
	PasswordHash string    `gorm:"not null"`
	IsAdmin      bool      `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

func (driftedNullability) TableName() string { return "users" }

type noTable struct{ ID int64 }

func TestCheckSchemaFindsDrift(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		tests := []struct {
			name   string
			models []any
			want   string
		}{
			{"extra field", []any{&driftedExtraField{}}, "users.nickname: field Nickname"},
			{"wrong kind", []any{&driftedKind{}}, "users.is_admin: model kind text"},
			{"column without field", []any{&driftedMissingColumn{}}, "users.email: column has no field"},
			{"nullability", []any{&driftedNullability{}}, "users.email: model NOT NULL=false"},
			{"table without migration", []any{&driftedExtraField{}, &noTable{}}, `table "no_tables" is not created`},
			{"table without model", nil, `table "users" has no model`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := store.CheckSchema(db, tt.models...)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
				}
			})
		}
	})
}
