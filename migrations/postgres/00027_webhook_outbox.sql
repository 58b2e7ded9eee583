-- +goose Up
-- Every outgoing webhook, written in the transaction of its event (backend/outbox). claim is
-- the fence of the delivery loop's conditional updates.
CREATE TABLE webhook_outbox (
    id           BIGSERIAL PRIMARY KEY,
    kind         TEXT NOT NULL,
    ref          BIGINT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    claim        BIGINT NOT NULL DEFAULT 0,
    due_at       TIMESTAMPTZ NOT NULL,
    last_error   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    UNIQUE (kind, ref)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (status, due_at);

-- Billing alerts not yet delivered go on from here (their retries were kept in memory).
INSERT INTO webhook_outbox (kind, ref, status, attempts, claim, due_at, last_error, created_at)
SELECT 'billing.alert', id, 'pending', 0, 0, created_at, '', created_at
FROM billing_notifications WHERE delivered = FALSE;

-- Publish deliveries still pending go on with the attempts they had.
INSERT INTO webhook_outbox (kind, ref, status, attempts, claim, due_at, last_error, created_at)
SELECT 'artifacts.publish', id, 'pending', attempts, 0, due_at, error, created_at
FROM artifact_publish_deliveries WHERE status = 'pending';

-- +goose Down
DROP TABLE webhook_outbox;
