-- +goose Up
-- Generic files (model weights, datasets) of a repo (backend/artifacts): package → version →
-- files. The bytes live in the artifact store (backend/artifacts/storage), keyed by digest; a
-- file row is the only claim on them, and what no row (here or in registry_blobs) references
-- is the garbage collector's. Everything goes with the repo (ON DELETE CASCADE).
CREATE TABLE artifact_packages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    BIGINT      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    name       TEXT        NOT NULL,
    created_at DATETIME    NOT NULL,
    updated_at DATETIME    NOT NULL,
    UNIQUE (repo_id, name)
);

-- A version records who produced it: the pipeline (and its build and commit) when a job token
-- pushed it, else the person. Provenance is copied, not referenced: it outlives the build rows.
CREATE TABLE artifact_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    package_id   BIGINT      NOT NULL REFERENCES artifact_packages (id) ON DELETE CASCADE,
    version      TEXT        NOT NULL,
    pipeline_id  BIGINT,
    build_id     BIGINT,
    build_number BIGINT,
    commit_sha   TEXT        NOT NULL,
    pushed_by    BIGINT,
    created_at   DATETIME    NOT NULL,
    UNIQUE (package_id, version)
);

CREATE TABLE artifact_files (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    version_id BIGINT      NOT NULL REFERENCES artifact_versions (id) ON DELETE CASCADE,
    name       TEXT        NOT NULL,
    digest     TEXT        NOT NULL,
    size       BIGINT      NOT NULL,
    created_at DATETIME    NOT NULL,
    UNIQUE (version_id, name)
);
CREATE INDEX artifact_files_digest ON artifact_files (digest);

-- +goose Down
DROP TABLE artifact_files;
DROP TABLE artifact_versions;
DROP TABLE artifact_packages;
