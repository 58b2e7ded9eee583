-- +goose Up
-- When the server received each stored piece of a log (Unix milliseconds; 0 for pieces stored
-- before this column), for the job page's per-line timestamps.
ALTER TABLE log_chunks ADD COLUMN received_at BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE log_chunks DROP COLUMN received_at;
