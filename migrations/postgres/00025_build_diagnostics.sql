-- +goose Up
-- What linting and planning found in the build's .cnb.yml: every error and warning with the
-- lines it points at, as JSON (empty: nothing found), for the build page.
ALTER TABLE builds ADD COLUMN diagnostics TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE builds DROP COLUMN diagnostics;
