package server

import (
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// TestModelsMatchMigratedSchema is the guard between gorm models and the SQL migrations: every
// model's table and columns exist with the right kind and nullability on both dialects, and no
// migrated table or column lacks a model. store's own tests prove the check fails on drift.
func TestModelsMatchMigratedSchema(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		if err := store.CheckSchema(db, Models()...); err != nil {
			t.Fatal(err)
		}
	})
}
