-- +goose Up
-- A request outlives its source: deleting a fork must not delete the requests (and their
-- reviews and comments) that it opened against another team's repository. source_repo_id is
-- NULL once the fork is gone; the proposed commits stay reachable from refs/pull/N/head in the
-- target, so such a request can still be read, reviewed, merged or closed (never synced again).
-- SQLite cannot change a foreign key in place, so the table is rebuilt. Migrations run in a
-- transaction, where foreign keys cannot be switched off: dropping the old table deletes the
-- reviews, comments and reviewers that point at it (ON DELETE CASCADE), so they are kept in
-- temporary tables and put back once the new table has the old one's name.
CREATE TEMP TABLE keep_pull_reviews AS SELECT * FROM pull_reviews;
CREATE TEMP TABLE keep_pull_comments AS SELECT * FROM pull_comments;
CREATE TEMP TABLE keep_pull_reviewers AS SELECT * FROM pull_reviewers;
CREATE TABLE pull_requests_next (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id          INTEGER NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    number           INTEGER NOT NULL,
    source_repo_id INTEGER REFERENCES repos (id) ON DELETE SET NULL,
    source_branch    TEXT NOT NULL,
    target_branch    TEXT NOT NULL,
    title            TEXT NOT NULL,
    body             TEXT NOT NULL DEFAULT '',
    state            TEXT NOT NULL,
    author_id        INTEGER NOT NULL REFERENCES users (id),
    head_sha         TEXT NOT NULL,
    base_sha         TEXT NOT NULL,
    merge_base       TEXT NOT NULL DEFAULT '',
    merge_sha        TEXT NOT NULL DEFAULT '',
    conflicts        TEXT NOT NULL DEFAULT '[]',
    mergeable_sha    TEXT NOT NULL DEFAULT '',
    merged_by        INTEGER REFERENCES users (id),
    merged_at        DATETIME,
    merge_commit     TEXT NOT NULL DEFAULT '',
    merge_mode       TEXT NOT NULL DEFAULT '',
    closed_at        DATETIME,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL,
    run_approved_sha TEXT NOT NULL DEFAULT '',
    run_approved_by  INTEGER,
    UNIQUE (repo_id, number)
);
INSERT INTO pull_requests_next (id, repo_id, number, source_repo_id, source_branch, target_branch, title, body, state, author_id, head_sha, base_sha, merge_base, merge_sha, conflicts, mergeable_sha, merged_by, merged_at, merge_commit, merge_mode, closed_at, created_at, updated_at, run_approved_sha, run_approved_by)
    SELECT id, repo_id, number, source_repo_id, source_branch, target_branch, title, body, state, author_id, head_sha, base_sha, merge_base, merge_sha, conflicts, mergeable_sha, merged_by, merged_at, merge_commit, merge_mode, closed_at, created_at, updated_at, run_approved_sha, run_approved_by FROM pull_requests;
DROP TABLE pull_requests;
ALTER TABLE pull_requests_next RENAME TO pull_requests;
CREATE INDEX pull_requests_state ON pull_requests (repo_id, state, number);
CREATE INDEX pull_requests_source ON pull_requests (source_repo_id, source_branch);
INSERT INTO pull_reviews SELECT * FROM keep_pull_reviews;
INSERT INTO pull_comments SELECT * FROM keep_pull_comments;
INSERT INTO pull_reviewers SELECT * FROM keep_pull_reviewers;
DROP TABLE keep_pull_reviews;
DROP TABLE keep_pull_comments;
DROP TABLE keep_pull_reviewers;

-- +goose Down
DELETE FROM pull_requests WHERE source_repo_id IS NULL;
CREATE TEMP TABLE keep_pull_reviews AS SELECT * FROM pull_reviews;
CREATE TEMP TABLE keep_pull_comments AS SELECT * FROM pull_comments;
CREATE TEMP TABLE keep_pull_reviewers AS SELECT * FROM pull_reviewers;
CREATE TABLE pull_requests_next (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id          INTEGER NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    number           INTEGER NOT NULL,
    source_repo_id INTEGER NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    source_branch    TEXT NOT NULL,
    target_branch    TEXT NOT NULL,
    title            TEXT NOT NULL,
    body             TEXT NOT NULL DEFAULT '',
    state            TEXT NOT NULL,
    author_id        INTEGER NOT NULL REFERENCES users (id),
    head_sha         TEXT NOT NULL,
    base_sha         TEXT NOT NULL,
    merge_base       TEXT NOT NULL DEFAULT '',
    merge_sha        TEXT NOT NULL DEFAULT '',
    conflicts        TEXT NOT NULL DEFAULT '[]',
    mergeable_sha    TEXT NOT NULL DEFAULT '',
    merged_by        INTEGER REFERENCES users (id),
    merged_at        DATETIME,
    merge_commit     TEXT NOT NULL DEFAULT '',
    merge_mode       TEXT NOT NULL DEFAULT '',
    closed_at        DATETIME,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL,
    run_approved_sha TEXT NOT NULL DEFAULT '',
    run_approved_by  INTEGER,
    UNIQUE (repo_id, number)
);
INSERT INTO pull_requests_next (id, repo_id, number, source_repo_id, source_branch, target_branch, title, body, state, author_id, head_sha, base_sha, merge_base, merge_sha, conflicts, mergeable_sha, merged_by, merged_at, merge_commit, merge_mode, closed_at, created_at, updated_at, run_approved_sha, run_approved_by)
    SELECT id, repo_id, number, source_repo_id, source_branch, target_branch, title, body, state, author_id, head_sha, base_sha, merge_base, merge_sha, conflicts, mergeable_sha, merged_by, merged_at, merge_commit, merge_mode, closed_at, created_at, updated_at, run_approved_sha, run_approved_by FROM pull_requests;
DROP TABLE pull_requests;
ALTER TABLE pull_requests_next RENAME TO pull_requests;
CREATE INDEX pull_requests_state ON pull_requests (repo_id, state, number);
CREATE INDEX pull_requests_source ON pull_requests (source_repo_id, source_branch);
INSERT INTO pull_reviews SELECT * FROM keep_pull_reviews;
INSERT INTO pull_comments SELECT * FROM keep_pull_comments;
INSERT INTO pull_reviewers SELECT * FROM keep_pull_reviewers;
DROP TABLE keep_pull_reviews;
DROP TABLE keep_pull_comments;
DROP TABLE keep_pull_reviewers;
