-- +goose Up
-- A repo's publish webhook (its secret sealed), and one delivery per new model version.
CREATE TABLE artifact_publish_hooks (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    INTEGER NOT NULL UNIQUE REFERENCES repos (id) ON DELETE CASCADE,
    url        TEXT NOT NULL,
    secret     BLOB NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

CREATE TABLE artifact_publish_deliveries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id       INTEGER NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    version_id    INTEGER NOT NULL UNIQUE,
    package       TEXT NOT NULL,
    version       TEXT NOT NULL,
    status        TEXT NOT NULL,
    attempts      INTEGER NOT NULL,
    response_code INTEGER NOT NULL,
    error         TEXT NOT NULL,
    due_at        DATETIME NOT NULL,
    created_at    DATETIME NOT NULL,
    delivered_at  DATETIME
);
CREATE INDEX artifact_publish_deliveries_due ON artifact_publish_deliveries (status, due_at);
CREATE INDEX artifact_publish_deliveries_repo ON artifact_publish_deliveries (repo_id, id);

-- +goose Down
DROP TABLE artifact_publish_deliveries;
DROP TABLE artifact_publish_hooks;
