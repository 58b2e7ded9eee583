-- +goose Up
-- Job logs (package backend/logs). job_logs holds one job's log state; log_chunks holds the
-- bytes in order: a chunk starts where the previous one ends.
CREATE TABLE job_logs (
    job_id     INTEGER  PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    size       INTEGER  NOT NULL,
    truncated  BOOLEAN  NOT NULL,
    complete   BOOLEAN  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

CREATE TABLE log_chunks (
    job_id      INTEGER NOT NULL REFERENCES job_logs (job_id) ON DELETE CASCADE,
    byte_offset INTEGER NOT NULL,
    data        BLOB    NOT NULL,
    PRIMARY KEY (job_id, byte_offset)
);

-- +goose Down
DROP TABLE log_chunks;
DROP TABLE job_logs;
