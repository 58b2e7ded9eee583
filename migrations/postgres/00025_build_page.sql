-- +goose Up
-- What linting and planning found in the build's .cnb.yml: every error and warning with the
-- lines it points at, as JSON (empty: nothing found), for the build page. And the build a
-- re-run repeats, so the page links its original.
ALTER TABLE builds ADD COLUMN diagnostics TEXT NOT NULL DEFAULT '';
ALTER TABLE builds ADD COLUMN rerun_of BIGINT REFERENCES builds (id) ON DELETE SET NULL;

-- +goose Down
ALTER TABLE builds DROP COLUMN rerun_of;
ALTER TABLE builds DROP COLUMN diagnostics;
