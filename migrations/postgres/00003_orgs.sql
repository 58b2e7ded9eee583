-- +goose Up
CREATE TABLE orgs (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX orgs_name_key ON orgs (lower(name));

CREATE TABLE org_members (
    org_id     BIGINT      NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    user_id    BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'developer', 'reporter')),
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user_id ON org_members (user_id);

CREATE TABLE org_invitations (
    id         BIGSERIAL PRIMARY KEY,
    org_id     BIGINT      NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    user_id    BIGINT      REFERENCES users (id) ON DELETE CASCADE,
    email      TEXT        NOT NULL,
    role       TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'developer', 'reporter')),
    invited_by BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX org_invitations_org_id ON org_invitations (org_id);

CREATE TABLE billing_accounts (
    id         BIGSERIAL PRIMARY KEY,
    org_id     BIGINT      NOT NULL UNIQUE REFERENCES orgs (id) ON DELETE CASCADE,
    currency   TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE billing_accounts;
DROP TABLE org_invitations;
DROP TABLE org_members;
DROP TABLE orgs;
