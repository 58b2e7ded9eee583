-- +goose Up
-- What reproducibility records are built from, as the agent saw it: its host's facts (kept on
-- the agent, and snapshot on each pipeline it leases, since agents are upgraded and move), and
-- the image each job's container ran, by digest, and the model files it moved.
ALTER TABLE agents ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE pipelines ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN image_digest TEXT NOT NULL DEFAULT '';

-- Every model file a pipeline pushed or pulled (with its job token), with its digest.
CREATE TABLE artifact_uses (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline_id INTEGER NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
    direction   TEXT NOT NULL,
    repo_id     INTEGER NOT NULL,
    package     TEXT NOT NULL,
    version     TEXT NOT NULL,
    file        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    at          DATETIME NOT NULL,
    UNIQUE (pipeline_id, direction, repo_id, package, version, file)
);

-- +goose Down
DROP TABLE artifact_uses;
ALTER TABLE jobs DROP COLUMN image_digest;
ALTER TABLE jobs DROP COLUMN image;
ALTER TABLE pipelines DROP COLUMN host;
ALTER TABLE agents DROP COLUMN host;
