-- +goose Up
-- Platform registration tokens: made by platform admins on the Agents page, shown once, kept
-- hashed, deleted to stop them registering agents (the installation's configured token,
-- agent-registration.token, works beside them).
CREATE TABLE registration_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_by   INTEGER NOT NULL,
    created_at   DATETIME NOT NULL,
    last_used_at DATETIME
);
-- An agent that takes a pipeline larger than its cores alone, on all of them (the all-in-one's
-- built-in agent: a 2-core laptop runs the brief's 16-core example).
ALTER TABLE agents ADD COLUMN whole_host BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE agents DROP COLUMN whole_host;
DROP TABLE registration_tokens;
