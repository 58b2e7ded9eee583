-- +goose Up
CREATE TABLE builds (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id        INTEGER      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    number         INTEGER      NOT NULL,
    event          TEXT        NOT NULL,
    branch         TEXT        NOT NULL,
    tag            TEXT        NOT NULL,
    commit_sha     TEXT        NOT NULL,
    commit_message TEXT        NOT NULL,
    triggered_by   INTEGER,
    status         TEXT        NOT NULL,
    error_message  TEXT        NOT NULL,
    error_file     TEXT        NOT NULL,
    error_line     INTEGER     NOT NULL,
    error_column   INTEGER     NOT NULL,
    created_at     DATETIME NOT NULL,
    updated_at     DATETIME NOT NULL,
    started_at     DATETIME,
    finished_at    DATETIME,
    UNIQUE (repo_id, number)
);

CREATE TABLE pipelines (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id    INTEGER      NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    position    INTEGER     NOT NULL,
    key         TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    status      TEXT        NOT NULL,
    reason      TEXT        NOT NULL,
    runner_tag  TEXT        NOT NULL,
    cpus        INTEGER     NOT NULL,
    plan        TEXT        NOT NULL,
    created_at  DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL,
    started_at  DATETIME,
    finished_at DATETIME
);
CREATE INDEX pipelines_build_id ON pipelines (build_id);
CREATE INDEX pipelines_status ON pipelines (status);

CREATE TABLE stages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline_id INTEGER  NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    parallel    BOOLEAN NOT NULL,
    status      TEXT    NOT NULL,
    started_at  DATETIME,
    finished_at DATETIME
);
CREATE INDEX stages_pipeline_id ON stages (pipeline_id);

CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    stage_id    INTEGER  NOT NULL REFERENCES stages (id) ON DELETE CASCADE,
    pipeline_id INTEGER  NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    exit_code   INTEGER,
    started_at  DATETIME,
    finished_at DATETIME
);
CREATE INDEX jobs_stage_id ON jobs (stage_id);
CREATE INDEX jobs_pipeline_id ON jobs (pipeline_id);

CREATE TABLE schedules (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id       INTEGER      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    branch        TEXT        NOT NULL,
    event         TEXT        NOT NULL,
    cron          TEXT        NOT NULL,
    user_id       INTEGER      NOT NULL,
    last_fired_at DATETIME,
    created_at    DATETIME NOT NULL,
    updated_at    DATETIME NOT NULL,
    UNIQUE (repo_id, branch, event, cron)
);

-- +goose Down
DROP TABLE schedules;
DROP TABLE jobs;
DROP TABLE stages;
DROP TABLE pipelines;
DROP TABLE builds;
