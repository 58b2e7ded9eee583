-- +goose Up
-- Releases: a tag of a repo with a title, notes and files. The files are artifact files of the
-- repo's reserved package "_releases", version = the tag, so they are stored, counted in the
-- team's storage and collected like every other file.
CREATE TABLE releases (
    id           BIGSERIAL PRIMARY KEY,
    repo_id      BIGINT      NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    tag          TEXT        NOT NULL,
    title        TEXT        NOT NULL,
    notes        TEXT        NOT NULL,
    pre_release  BOOLEAN     NOT NULL,
    latest       BOOLEAN     NOT NULL,
    commit_sha   TEXT        NOT NULL,
    pipeline_id  BIGINT,
    build_number BIGINT,
    created_by   BIGINT,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (repo_id, tag)
);

-- +goose Down
DROP TABLE releases;
