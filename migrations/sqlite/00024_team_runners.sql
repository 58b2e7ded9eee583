-- +goose Up
-- Team runners: a team's registration tokens (hashed), and the team an agent registered with
-- one serves (NULL for platform agents), with its pause switch.
CREATE TABLE runner_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       INTEGER NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_by   INTEGER NOT NULL,
    created_at   DATETIME NOT NULL,
    last_used_at DATETIME
);
CREATE INDEX runner_tokens_org ON runner_tokens (org_id, id);

ALTER TABLE agents ADD COLUMN org_id INTEGER REFERENCES orgs (id) ON DELETE CASCADE;
ALTER TABLE agents ADD COLUMN paused_at DATETIME;
CREATE INDEX agents_org ON agents (org_id);

-- +goose Down
DROP INDEX agents_org;
ALTER TABLE agents DROP COLUMN paused_at;
ALTER TABLE agents DROP COLUMN org_id;
DROP TABLE runner_tokens;
