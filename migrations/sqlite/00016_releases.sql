-- +goose Up
-- Releases: a tag of a repo with a title, notes and files. The files are artifact files of the
-- repo's reserved package "_releases", version = the tag, so they are stored, counted in the
-- team's storage and collected like every other file.
CREATE TABLE releases (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    tag          TEXT        NOT NULL,
    title        TEXT        NOT NULL,
    notes        TEXT        NOT NULL,
    pre_release  BOOLEAN     NOT NULL,
    latest       BOOLEAN     NOT NULL,
    commit_sha   TEXT        NOT NULL,
    pipeline_id  INTEGER,
    build_number INTEGER,
    created_by   INTEGER,
    created_at   DATETIME    NOT NULL,
    updated_at   DATETIME    NOT NULL,
    UNIQUE (repo_id, tag)
);

-- +goose Down
DROP TABLE releases;
