-- +goose Up
-- Builds and cloud development workspaces are billed in buckets of their own: each has its own
-- monthly free CPU quota (backend/billing). A pipeline's billing record says its bucket; the
-- quota is kept per account, month and bucket. Rows from before are builds.
ALTER TABLE pipeline_billing ADD COLUMN bucket TEXT NOT NULL DEFAULT 'build';
ALTER TABLE quota_usage ADD COLUMN bucket TEXT NOT NULL DEFAULT 'build';
ALTER TABLE quota_usage DROP CONSTRAINT quota_usage_pkey;
ALTER TABLE quota_usage ADD PRIMARY KEY (account_id, month, bucket);

-- +goose Down
DELETE FROM quota_usage WHERE bucket <> 'build';
ALTER TABLE quota_usage DROP CONSTRAINT quota_usage_pkey;
ALTER TABLE quota_usage ADD PRIMARY KEY (account_id, month);
ALTER TABLE quota_usage DROP COLUMN bucket;
ALTER TABLE pipeline_billing DROP COLUMN bucket;
