-- +goose Up
-- The names (never the values) of the repo secrets a pipeline's lease handed its jobs as
-- variables: its reproducibility record lists them among the env, values masked (JSON list).
ALTER TABLE pipelines ADD COLUMN secret_names TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE pipelines DROP COLUMN secret_names;
