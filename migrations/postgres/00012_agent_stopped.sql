-- +goose Up
-- When an agent said it was stopping (a graceful shutdown deregisters it): it is offline from
-- then on, until it is heard from again (last_seen_at later than stopped_at).
ALTER TABLE agents ADD COLUMN stopped_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE agents DROP COLUMN stopped_at;
