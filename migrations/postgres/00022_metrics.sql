-- +goose Up
-- The numbers jobs report with ##[set-output metric.<name>=<number>], charted across the builds
-- of a branch. Branch, number and commit are the build's, copied so a series is one index scan.
CREATE TABLE metrics (
    id           BIGSERIAL PRIMARY KEY,
    repo_id      BIGINT NOT NULL,
    build_id     BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    pipeline_id  BIGINT NOT NULL,
    job_id       BIGINT NOT NULL,
    build_number BIGINT NOT NULL,
    branch       TEXT NOT NULL,
    commit_sha   TEXT NOT NULL,
    name         TEXT NOT NULL,
    value        DOUBLE PRECISION NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (job_id, name)
);
CREATE INDEX metrics_series ON metrics (repo_id, branch, name, build_number);

-- +goose Down
DROP TABLE metrics;
