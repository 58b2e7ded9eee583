-- +goose Up
-- Secret repositories (CNB's 密钥仓库): a repo whose files hold credentials that pipelines
-- import as env. It has no git content: its files live here, sealed with the server key, one
-- version each, and every read by a pipeline, allowed or refused, is audited.
ALTER TABLE repos ADD COLUMN secret BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE secret_files (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    INTEGER     NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    path       TEXT        NOT NULL,
    sealed     BLOB        NOT NULL,
    size       INTEGER     NOT NULL,
    updated_by INTEGER     NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    UNIQUE (repo_id, path)
);

CREATE TABLE secret_file_reads (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER     NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    path         TEXT        NOT NULL,
    kind         TEXT        NOT NULL,
    reader       TEXT        NOT NULL,
    pipeline_id  INTEGER     NOT NULL,
    build_number INTEGER     NOT NULL,
    user_id      INTEGER     NOT NULL,
    allowed      BOOLEAN     NOT NULL,
    reason       TEXT        NOT NULL,
    read_at      DATETIME NOT NULL
);
CREATE INDEX secret_file_reads_repo ON secret_file_reads (repo_id, id);

-- +goose Down
DROP TABLE secret_file_reads;
DROP TABLE secret_files;
ALTER TABLE repos DROP COLUMN secret;
