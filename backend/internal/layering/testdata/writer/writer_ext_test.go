package writer_test

import (
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/internal/layering/testdata/writer"
)

// An external test package writes too, and uses the package under test.
func seed(db *gorm.DB) {
	db.Save(&build.Stage{}) // line 12
	writer.Reads(nil, db)
}
