-- +goose Up
-- What reproducibility records are built from, as the agent saw it: its host's facts (kept on
-- the agent, and snapshot on each pipeline it leases, since agents are upgraded and move), and
-- the image each job's container ran, by digest.
ALTER TABLE agents ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE pipelines ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN image_digest TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN image_digest;
ALTER TABLE jobs DROP COLUMN image;
ALTER TABLE pipelines DROP COLUMN host;
ALTER TABLE agents DROP COLUMN host;
