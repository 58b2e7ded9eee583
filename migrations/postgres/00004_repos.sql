-- +goose Up
CREATE TABLE repos (
    id             BIGSERIAL PRIMARY KEY,
    org_id         BIGINT      NOT NULL REFERENCES orgs (id),
    name           TEXT        NOT NULL,
    description    TEXT        NOT NULL DEFAULT '',
    visibility     TEXT        NOT NULL CHECK (visibility IN ('private', 'public')),
    default_branch TEXT        NOT NULL,
    archived       BOOLEAN     NOT NULL DEFAULT FALSE,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX repos_org_name_key ON repos (org_id, lower(name));

CREATE TABLE repo_secrets (
    id         BIGSERIAL PRIMARY KEY,
    repo_id    BIGINT      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name       TEXT        NOT NULL,
    sealed     BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (repo_id, name)
);

CREATE TABLE deploy_tokens (
    id           BIGSERIAL PRIMARY KEY,
    repo_id      BIGINT      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name         TEXT        NOT NULL,
    token_hash   TEXT        NOT NULL UNIQUE,
    prefix       TEXT        NOT NULL,
    created_by   BIGINT      NOT NULL,
    expires_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX deploy_tokens_repo_id ON deploy_tokens (repo_id);

-- +goose Down
DROP TABLE deploy_tokens;
DROP TABLE repo_secrets;
DROP TABLE repos;
