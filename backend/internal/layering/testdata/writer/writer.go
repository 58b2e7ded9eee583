// Package writer is the layering check's own test: code outside package build that writes
// build's tables in every way the check must see, and reads them in ways it must let through.
package writer

import (
	"context"
	"database/sql"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
)

// Writes writes build's rows.
func Writes(ctx context.Context, db *gorm.DB, raw *sql.DB) {
	db.Model(&build.Pipeline{}).Where("id = ?", 1).Update("status", "failed") // line 16: Model + Update
	job := build.Job{Name: "j"}
	db.Create(&job) // line 18: Create of a model value
	tx := db.WithContext(ctx)
	tx.Table("stages").Where("id = ?", 1).Updates(map[string]any{}) // line 20: Table + Updates
	db.Exec("UPDATE builds SET status = 'x' WHERE id = ?", 1)       // line 21: raw SQL on gorm
	raw.ExecContext(ctx, `delete from "jobs" where id = $1`, 1)     // line 22: raw SQL on database/sql
	var all []build.Schedule
	db.Where("1 = 1").Delete(&all) // line 24: Delete of a slice of models
}

// Reads only reads: nothing here may be reported.
func Reads(ctx context.Context, db *gorm.DB) {
	var p build.Pipeline
	db.WithContext(ctx).Take(&p, 1)
	var n int64
	db.Model(&build.Job{}).Where("pipeline_id = ?", p.ID).Count(&n)
	db.Table("pipelines").Select("id").Scan(&[]int64{})
	db.Raw("SELECT * FROM builds WHERE updated_at > now()").Scan(&[]build.Build{})
	db.Exec("UPDATE other_table SET x = 1")
}
