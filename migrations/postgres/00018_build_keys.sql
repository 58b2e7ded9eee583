-- +goose Up
-- cnb:resolve / cnb:await: keys scoped to one build. A key resolves once (with its data) and is
-- awaited any number of times; build_waits says which pipeline awaits which key now, so that a
-- cycle of waits is found.
CREATE TABLE build_keys (
    id          BIGSERIAL PRIMARY KEY,
    build_id    BIGINT      NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    key         TEXT        NOT NULL,
    pipeline_id BIGINT      NOT NULL,
    data        TEXT        NOT NULL,
    resolved_at TIMESTAMPTZ NOT NULL,
    UNIQUE (build_id, key)
);

CREATE TABLE build_waits (
    id          BIGSERIAL PRIMARY KEY,
    build_id    BIGINT      NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    pipeline_id BIGINT      NOT NULL,
    key         TEXT        NOT NULL,
    since       TIMESTAMPTZ NOT NULL,
    UNIQUE (pipeline_id, key)
);
CREATE INDEX build_waits_build ON build_waits (build_id);

-- +goose Down
DROP TABLE build_waits;
DROP TABLE build_keys;
