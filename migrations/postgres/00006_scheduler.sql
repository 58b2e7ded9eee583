-- +goose Up
-- What the scheduler needs on a pipeline: its team and repo (fairness, caps, job tokens), when
-- it was queued, and the lease that holds it. A status move is always conditional on lease_id.
ALTER TABLE pipelines ADD COLUMN org_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pipelines ADD COLUMN repo_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pipelines ADD COLUMN queued_at TIMESTAMPTZ;
ALTER TABLE pipelines ADD COLUMN lease_id TEXT NOT NULL DEFAULT '';
ALTER TABLE pipelines ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE pipelines ADD COLUMN lease_expires_at TIMESTAMPTZ;
ALTER TABLE pipelines ADD COLUMN user_started BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE pipelines ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE pipelines ADD COLUMN job_token_hash TEXT NOT NULL DEFAULT '';
CREATE INDEX pipelines_lease_expires ON pipelines (lease_expires_at) WHERE status = 'running';
CREATE INDEX pipelines_job_token ON pipelines (job_token_hash) WHERE job_token_hash <> '';

-- failStages and endStages are stored after the normal stages; kind tells them apart.
ALTER TABLE stages ADD COLUMN kind TEXT NOT NULL DEFAULT '';

CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    name         TEXT        NOT NULL,
    token_hash   TEXT        NOT NULL UNIQUE,
    version      TEXT        NOT NULL,
    tags         TEXT        NOT NULL,
    executor     TEXT        NOT NULL,
    cpus         INTEGER     NOT NULL,
    memory_bytes BIGINT      NOT NULL,
    gpus         TEXT        NOT NULL,
    concurrency  INTEGER     NOT NULL,
    free_cpus    INTEGER     NOT NULL,
    free_gpus    INTEGER     NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE agents;
ALTER TABLE stages DROP COLUMN kind;
DROP INDEX pipelines_job_token;
DROP INDEX pipelines_lease_expires;
ALTER TABLE pipelines DROP COLUMN job_token_hash;
ALTER TABLE pipelines DROP COLUMN cancel_requested;
ALTER TABLE pipelines DROP COLUMN user_started;
ALTER TABLE pipelines DROP COLUMN lease_expires_at;
ALTER TABLE pipelines DROP COLUMN agent_id;
ALTER TABLE pipelines DROP COLUMN lease_id;
ALTER TABLE pipelines DROP COLUMN queued_at;
ALTER TABLE pipelines DROP COLUMN repo_id;
ALTER TABLE pipelines DROP COLUMN org_id;
