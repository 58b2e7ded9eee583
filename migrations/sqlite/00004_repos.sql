-- +goose Up
CREATE TABLE repos (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id         INTEGER      NOT NULL REFERENCES orgs (id),
    name           TEXT        NOT NULL,
    description    TEXT        NOT NULL DEFAULT '',
    visibility     TEXT        NOT NULL CHECK (visibility IN ('private', 'public')),
    default_branch TEXT        NOT NULL,
    archived       BOOLEAN     NOT NULL DEFAULT FALSE,
    created_at     DATETIME NOT NULL,
    updated_at     DATETIME NOT NULL
);
CREATE UNIQUE INDEX repos_org_name_key ON repos (org_id, lower(name));

CREATE TABLE repo_secrets (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    INTEGER      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name       TEXT        NOT NULL,
    sealed     BLOB       NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    UNIQUE (repo_id, name)
);

CREATE TABLE deploy_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name         TEXT        NOT NULL,
    token_hash   TEXT        NOT NULL UNIQUE,
    prefix       TEXT        NOT NULL,
    created_by   INTEGER      NOT NULL,
    expires_at   DATETIME,
    last_used_at DATETIME,
    revoked_at   DATETIME,
    created_at   DATETIME NOT NULL
);
CREATE INDEX deploy_tokens_repo_id ON deploy_tokens (repo_id);

-- +goose Down
DROP TABLE deploy_tokens;
DROP TABLE repo_secrets;
DROP TABLE repos;
