-- +goose Up
-- cnb:resolve / cnb:await: keys scoped to one build. A key resolves once (with its data) and is
-- awaited any number of times; build_waits says which pipeline awaits which key now, so that a
-- cycle of waits is found.
CREATE TABLE build_keys (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id    INTEGER      NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    key         TEXT        NOT NULL,
    pipeline_id INTEGER      NOT NULL,
    data        TEXT        NOT NULL,
    resolved_at DATETIME    NOT NULL,
    UNIQUE (build_id, key)
);

CREATE TABLE build_waits (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id    INTEGER      NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    pipeline_id INTEGER      NOT NULL,
    key         TEXT        NOT NULL,
    since       DATETIME    NOT NULL,
    UNIQUE (pipeline_id, key)
);
CREATE INDEX build_waits_build ON build_waits (build_id);

-- +goose Down
DROP TABLE build_waits;
DROP TABLE build_keys;
