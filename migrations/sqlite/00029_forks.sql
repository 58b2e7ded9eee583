-- +goose Up
-- Forks (repo.Service.Fork): fork_of is the repository a fork was made from; the fork's git
-- directory borrows that repository's objects (backend/git/fork.go). NULL once the source is
-- deleted (the fork then has its own copy).
-- (No REFERENCES here: SQLite cannot drop a column that is part of a foreign key; repo.Delete
-- clears fork_of of the forks itself.)
ALTER TABLE repos ADD COLUMN fork_of INTEGER;
CREATE INDEX repos_fork_of ON repos (fork_of);
-- A request from a fork by someone outside the target's team runs nothing until a maintainer
-- approves its head ("Approve and run"): run_approved_sha is the source head they approved.
ALTER TABLE pull_requests ADD COLUMN run_approved_sha TEXT NOT NULL DEFAULT '';
ALTER TABLE pull_requests ADD COLUMN run_approved_by INTEGER;
-- A build of a pull request's proposed code from a fork (build.Build.Untrusted): no repo
-- secrets, no secret files, caches of its own.
ALTER TABLE builds ADD COLUMN untrusted BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE builds DROP COLUMN untrusted;
ALTER TABLE pull_requests DROP COLUMN run_approved_by;
ALTER TABLE pull_requests DROP COLUMN run_approved_sha;
DROP INDEX repos_fork_of;
ALTER TABLE repos DROP COLUMN fork_of;
