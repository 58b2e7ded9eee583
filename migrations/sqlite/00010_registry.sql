-- +goose Up
-- The OCI registry (backend/registry). Blob bytes live in the artifact store
-- (backend/artifacts/storage), keyed by digest; these tables say which repository holds what.
-- A registry repository is a Nimbus repo ({org}/{repo}, name '') or an image below it
-- ({org}/{repo}/{name}); everything goes with the repo (ON DELETE CASCADE) and the bytes no
-- longer referenced are the garbage collector's.
CREATE TABLE registry_repositories (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    BIGINT      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name       TEXT        NOT NULL,
    created_at DATETIME NOT NULL,
    UNIQUE (repo_id, name)
);

-- A blob linked into a repository: pushed, mounted or uploaded there.
CREATE TABLE registry_blobs (
    repository_id BIGINT      NOT NULL REFERENCES registry_repositories (id) ON DELETE CASCADE,
    digest        TEXT        NOT NULL,
    size          BIGINT      NOT NULL,
    created_at    DATETIME NOT NULL,
    PRIMARY KEY (repository_id, digest)
);
CREATE INDEX registry_blobs_digest ON registry_blobs (digest);

-- Manifests are kept whole (the exact bytes that were pushed, at most 4 MiB).
CREATE TABLE registry_manifests (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id BIGINT      NOT NULL REFERENCES registry_repositories (id) ON DELETE CASCADE,
    digest        TEXT        NOT NULL,
    media_type    TEXT        NOT NULL,
    artifact_type TEXT        NOT NULL,
    subject       TEXT        NOT NULL,
    annotations   TEXT        NOT NULL,
    size          BIGINT      NOT NULL,
    content       BLOB        NOT NULL,
    created_at    DATETIME NOT NULL,
    UNIQUE (repository_id, digest)
);
CREATE INDEX registry_manifests_subject ON registry_manifests (repository_id, subject) WHERE subject <> '';

-- What a manifest references (config, layers, child manifests), for the garbage collector.
CREATE TABLE registry_manifest_refs (
    manifest_id BIGINT NOT NULL REFERENCES registry_manifests (id) ON DELETE CASCADE,
    digest      TEXT   NOT NULL,
    PRIMARY KEY (manifest_id, digest)
);
CREATE INDEX registry_manifest_refs_digest ON registry_manifest_refs (digest);

-- Tags sort byte-wise (the tag list pages with ?last=): SQLite compares bytes by default.
CREATE TABLE registry_tags (
    repository_id BIGINT        NOT NULL REFERENCES registry_repositories (id) ON DELETE CASCADE,
    name          TEXT          NOT NULL,
    digest        TEXT          NOT NULL,
    updated_at    DATETIME   NOT NULL,
    PRIMARY KEY (repository_id, name)
);
CREATE INDEX registry_tags_digest ON registry_tags (repository_id, digest);

-- Upload sessions; id is the storage session's id.
CREATE TABLE registry_uploads (
    id            TEXT        PRIMARY KEY,
    repository_id BIGINT      NOT NULL REFERENCES registry_repositories (id) ON DELETE CASCADE,
    created_at    DATETIME NOT NULL
);

-- +goose Down
DROP TABLE registry_uploads;
DROP TABLE registry_tags;
DROP TABLE registry_manifest_refs;
DROP TABLE registry_manifests;
DROP TABLE registry_blobs;
DROP TABLE registry_repositories;
