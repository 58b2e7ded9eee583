-- +goose Up
-- Builds and cloud development workspaces are billed in buckets of their own: each has its own
-- monthly free CPU quota (backend/billing). A pipeline's billing record says its bucket; the
-- quota is kept per account, month and bucket. Rows from before are builds. SQLite cannot change
-- a primary key in place: quota_usage is copied into a new table.
ALTER TABLE pipeline_billing ADD COLUMN bucket TEXT NOT NULL DEFAULT 'build';
CREATE TABLE quota_usage_buckets (
    account_id          BIGINT NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    month               TEXT   NOT NULL,
    used_core_seconds   BIGINT NOT NULL,
    frozen_core_seconds BIGINT NOT NULL,
    bucket              TEXT   NOT NULL DEFAULT 'build',
    PRIMARY KEY (account_id, month, bucket)
);
INSERT INTO quota_usage_buckets (account_id, month, used_core_seconds, frozen_core_seconds, bucket)
    SELECT account_id, month, used_core_seconds, frozen_core_seconds, 'build' FROM quota_usage;
DROP TABLE quota_usage;
ALTER TABLE quota_usage_buckets RENAME TO quota_usage;

-- +goose Down
CREATE TABLE quota_usage_months (
    account_id          BIGINT NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    month               TEXT   NOT NULL,
    used_core_seconds   BIGINT NOT NULL,
    frozen_core_seconds BIGINT NOT NULL,
    PRIMARY KEY (account_id, month)
);
INSERT INTO quota_usage_months (account_id, month, used_core_seconds, frozen_core_seconds)
    SELECT account_id, month, used_core_seconds, frozen_core_seconds FROM quota_usage WHERE bucket = 'build';
DROP TABLE quota_usage;
ALTER TABLE quota_usage_months RENAME TO quota_usage;
ALTER TABLE pipeline_billing DROP COLUMN bucket;
