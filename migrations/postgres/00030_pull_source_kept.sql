-- +goose Up
-- A request outlives its source: deleting a fork must not delete the requests (and their
-- reviews and comments) that it opened against another team's repository. source_repo_id is
-- NULL once the fork is gone; the proposed commits stay reachable from refs/pull/N/head in the
-- target, so such a request can still be read, reviewed, merged or closed (never synced again).
ALTER TABLE pull_requests ALTER COLUMN source_repo_id DROP NOT NULL;
ALTER TABLE pull_requests DROP CONSTRAINT pull_requests_source_repo_id_fkey;
ALTER TABLE pull_requests ADD CONSTRAINT pull_requests_source_repo_id_fkey
    FOREIGN KEY (source_repo_id) REFERENCES repos (id) ON DELETE SET NULL;

-- +goose Down
DELETE FROM pull_requests WHERE source_repo_id IS NULL;
ALTER TABLE pull_requests DROP CONSTRAINT pull_requests_source_repo_id_fkey;
ALTER TABLE pull_requests ADD CONSTRAINT pull_requests_source_repo_id_fkey
    FOREIGN KEY (source_repo_id) REFERENCES repos (id) ON DELETE CASCADE;
ALTER TABLE pull_requests ALTER COLUMN source_repo_id SET NOT NULL;
