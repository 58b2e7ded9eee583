-- +goose Up
-- Builds that pipelines start (cnb:apply, cnb:trigger) link to the build and pipeline that
-- started them; a job's exports are kept, so a parent can read its child's last job's.
ALTER TABLE builds ADD COLUMN parent_build_id BIGINT REFERENCES builds (id) ON DELETE SET NULL;
ALTER TABLE builds ADD COLUMN parent_pipeline_id BIGINT;
CREATE INDEX builds_parent ON builds (parent_build_id);
ALTER TABLE jobs ADD COLUMN exports TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN exports;
DROP INDEX builds_parent;
ALTER TABLE builds DROP COLUMN parent_pipeline_id;
ALTER TABLE builds DROP COLUMN parent_build_id;
