-- +goose Up
-- A version named after the build that pushed it (nimbus-<build id>, the build's CNB_BUILD_ID)
-- is the build's hand-off space between its pipelines: any of them adds files, it is never
-- "latest", and the collector removes it a while after the build ended.
ALTER TABLE artifact_versions ADD COLUMN build_scoped BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX artifact_versions_build_scoped ON artifact_versions (build_id) WHERE build_scoped = 1;

-- A job's built-in type (cnb:await, …; "" for scripts and plugins): the build page shows the
-- time a pipeline spent awaiting apart from its run time.
ALTER TABLE jobs ADD COLUMN type TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN type;
DROP INDEX artifact_versions_build_scoped;
ALTER TABLE artifact_versions DROP COLUMN build_scoped;
