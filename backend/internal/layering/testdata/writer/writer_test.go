package writer

import (
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
)

// A fixture seeding build rows by hand, in a test file: the check reads tests too.
func seed(t *testing.T, db *gorm.DB) {
	p := &build.Pipeline{Name: "p"}
	db.Create(p) // line 14
	t.Log(p.ID)
}
