-- +goose Up
-- Money is BIGINT units of 10^-8 of the currency (see backend/billing/money.go). Balances on
-- the account are kept in step with the ledger in the same transaction; the ledger is the truth.
ALTER TABLE billing_accounts ADD COLUMN balance BIGINT NOT NULL DEFAULT 0;
ALTER TABLE billing_accounts ADD COLUMN frozen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE billing_accounts ADD COLUMN stripe_customer_id TEXT NOT NULL DEFAULT '';
ALTER TABLE billing_accounts ADD COLUMN spending_cap BIGINT;
ALTER TABLE billing_accounts ADD COLUMN low_balance_threshold BIGINT;
ALTER TABLE billing_accounts ADD COLUMN alert_webhook_url TEXT NOT NULL DEFAULT '';

CREATE TABLE ledger_txns (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id      BIGINT      NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    kind            TEXT        NOT NULL,
    idempotency_key TEXT        NOT NULL UNIQUE,
    pipeline_id     BIGINT,
    amount          BIGINT      NOT NULL,
    note            TEXT        NOT NULL,
    created_at      DATETIME NOT NULL
);
CREATE INDEX ledger_txns_account ON ledger_txns (account_id, id);

-- Every transaction's postings sum to zero. account_id is NULL for the platform's own books
-- (stripe, grants, revenue, writeoff).
CREATE TABLE ledger_postings (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    txn_id     BIGINT NOT NULL REFERENCES ledger_txns (id) ON DELETE CASCADE,
    account_id BIGINT,
    book       TEXT   NOT NULL,
    amount     BIGINT NOT NULL
);
CREATE INDEX ledger_postings_txn ON ledger_postings (txn_id);
CREATE INDEX ledger_postings_book ON ledger_postings (account_id, book);

CREATE TABLE quota_usage (
    account_id          BIGINT NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    month               TEXT   NOT NULL,
    used_core_seconds   BIGINT NOT NULL,
    frozen_core_seconds BIGINT NOT NULL,
    PRIMARY KEY (account_id, month)
);

-- One row per started pipeline: what is frozen for it and, once settled, what it cost.
CREATE TABLE pipeline_billing (
    pipeline_id        BIGINT PRIMARY KEY,
    account_id         BIGINT      NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    repo_id            BIGINT      NOT NULL,
    class              TEXT        NOT NULL,
    cores              INTEGER     NOT NULL,
    price              BIGINT      NOT NULL,
    quota_month        TEXT        NOT NULL,
    started_at         DATETIME NOT NULL,
    frozen_until       DATETIME NOT NULL,
    windows            INTEGER     NOT NULL,
    frozen_quota       BIGINT      NOT NULL,
    frozen_amount      BIGINT      NOT NULL,
    settled            BOOLEAN     NOT NULL,
    ended_at           DATETIME,
    core_seconds       BIGINT      NOT NULL,
    quota_core_seconds BIGINT      NOT NULL,
    cost               BIGINT      NOT NULL
);
CREATE INDEX pipeline_billing_due ON pipeline_billing (frozen_until) WHERE NOT settled;
CREATE INDEX pipeline_billing_account ON pipeline_billing (account_id, ended_at);

CREATE TABLE billing_notifications (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id BIGINT      NOT NULL REFERENCES billing_accounts (id) ON DELETE CASCADE,
    kind       TEXT        NOT NULL,
    dedupe_key TEXT        NOT NULL UNIQUE,
    message    TEXT        NOT NULL,
    created_at DATETIME NOT NULL,
    delivered  BOOLEAN     NOT NULL
);

-- +goose Down
DROP TABLE billing_notifications;
DROP TABLE pipeline_billing;
DROP TABLE quota_usage;
DROP TABLE ledger_postings;
DROP TABLE ledger_txns;
ALTER TABLE billing_accounts DROP COLUMN alert_webhook_url;
ALTER TABLE billing_accounts DROP COLUMN low_balance_threshold;
ALTER TABLE billing_accounts DROP COLUMN spending_cap;
ALTER TABLE billing_accounts DROP COLUMN stripe_customer_id;
ALTER TABLE billing_accounts DROP COLUMN frozen;
ALTER TABLE billing_accounts DROP COLUMN balance;
