-- +goose Up
-- Pull requests (backend/pull): a source branch, of the same repository for now, proposed for
-- merging into a target branch. number is the repository's own sequence. head_sha and base_sha
-- are the source and target heads the request was last brought up to date with; merge_sha is
-- the pre-merged commit (refs/pull/<number>/merge), empty while the two conflict, and
-- conflicts the conflicting paths as a JSON array.
CREATE TABLE pull_requests (
    id             BIGSERIAL PRIMARY KEY,
    repo_id        BIGINT NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    number         BIGINT NOT NULL,
    source_repo_id BIGINT NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    source_branch  TEXT NOT NULL,
    target_branch  TEXT NOT NULL,
    title          TEXT NOT NULL,
    body           TEXT NOT NULL DEFAULT '',
    state          TEXT NOT NULL,
    author_id      BIGINT NOT NULL REFERENCES users (id),
    head_sha       TEXT NOT NULL,
    base_sha       TEXT NOT NULL,
    merge_base     TEXT NOT NULL DEFAULT '',
    merge_sha      TEXT NOT NULL DEFAULT '',
    conflicts      TEXT NOT NULL DEFAULT '[]',
    mergeable_sha  TEXT NOT NULL DEFAULT '',
    merged_by      BIGINT REFERENCES users (id),
    merged_at      TIMESTAMPTZ,
    merge_commit   TEXT NOT NULL DEFAULT '',
    merge_mode     TEXT NOT NULL DEFAULT '',
    closed_at      TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (repo_id, number)
);
CREATE INDEX pull_requests_state ON pull_requests (repo_id, state, number);
CREATE INDEX pull_requests_source ON pull_requests (source_repo_id, source_branch);

-- Reviews of pull requests: approve, request changes or comment, by a person, on the source
-- head of the time (commit_sha), so an approval of an older head can be told stale.
CREATE TABLE pull_reviews (
    id          BIGSERIAL PRIMARY KEY,
    pull_id     BIGINT NOT NULL REFERENCES pull_requests (id) ON DELETE CASCADE,
    reviewer_id BIGINT NOT NULL REFERENCES users (id),
    state       TEXT NOT NULL,
    body        TEXT NOT NULL DEFAULT '',
    commit_sha  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX pull_reviews_pull ON pull_reviews (pull_id, id);

-- Comments on a request (backend/pull/comment.go): on the whole request (path ''), or on line of
-- path at commit_sha, moved to the head on each push or marked outdated. pipeline_id is the
-- pipeline that posted it with its job token (no reference: pipelines are history).
CREATE TABLE pull_comments (
    id          BIGSERIAL PRIMARY KEY,
    pull_id     BIGINT NOT NULL REFERENCES pull_requests (id) ON DELETE CASCADE,
    author_id   BIGINT NOT NULL REFERENCES users (id),
    pipeline_id BIGINT,
    body        TEXT NOT NULL,
    path        TEXT NOT NULL DEFAULT '',
    line        INTEGER NOT NULL DEFAULT 0,
    commit_sha  TEXT NOT NULL DEFAULT '',
    outdated    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX pull_comments_pull ON pull_comments (pull_id, id);

-- Branch rules (protected branches, backend/pull/rules.go): per glob of branch names, who may
-- push directly (push_roles, a JSON array of team roles), force pushes and deletion, and what a
-- pull request needs to merge (approvals, required_checks: a JSON array of pipeline names).
CREATE TABLE branch_rules (
    id                 BIGSERIAL PRIMARY KEY,
    repo_id            BIGINT NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    pattern            TEXT NOT NULL,
    push_roles         TEXT NOT NULL DEFAULT '[]',
    allow_force_push   BOOLEAN NOT NULL DEFAULT FALSE,
    allow_deletion     BOOLEAN NOT NULL DEFAULT FALSE,
    required_approvals INTEGER NOT NULL DEFAULT 0,
    required_checks    TEXT NOT NULL DEFAULT '[]',
    dismiss_stale      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    UNIQUE (repo_id, pattern)
);

-- A repository's merge settings: which merge modes its pull requests may use (no row: all).
CREATE TABLE pull_settings (
    repo_id      BIGINT PRIMARY KEY REFERENCES repos (id) ON DELETE CASCADE,
    allow_merge  BOOLEAN NOT NULL DEFAULT TRUE,
    allow_squash BOOLEAN NOT NULL DEFAULT TRUE,
    allow_rebase BOOLEAN NOT NULL DEFAULT TRUE,
    updated_at   TIMESTAMPTZ NOT NULL
);

-- The pull request a pull_request* build is for (build.Build.PullNumber), and the request's
-- source head it ran on (the merge gate reads the checks of the current head).
ALTER TABLE builds ADD COLUMN pull_number BIGINT;
ALTER TABLE builds ADD COLUMN pull_head_sha TEXT NOT NULL DEFAULT '';
CREATE INDEX builds_pull ON builds (repo_id, pull_number);

-- External commit statuses (backend/build/commitstatus.go): the latest state of each context
-- on a commit, set with a token (CNB's repo-commit-status scope).
CREATE TABLE commit_statuses (
    id          BIGSERIAL PRIMARY KEY,
    repo_id     BIGINT NOT NULL REFERENCES repos (id) ON DELETE CASCADE,
    commit_sha  TEXT NOT NULL,
    context     TEXT NOT NULL,
    state       TEXT NOT NULL,
    target_url  TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    creator_id  BIGINT REFERENCES users (id),
    pipeline_id BIGINT,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (repo_id, commit_sha, context)
);

-- The people asked to review a request (backend/pull/reviewers.go).
CREATE TABLE pull_reviewers (
    pull_id      BIGINT NOT NULL REFERENCES pull_requests (id) ON DELETE CASCADE,
    user_id      BIGINT NOT NULL REFERENCES users (id),
    requested_by BIGINT REFERENCES users (id),
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (pull_id, user_id)
);

-- +goose Down
DROP TABLE pull_reviewers;
DROP TABLE commit_statuses;
DROP TABLE pull_settings;
DROP TABLE branch_rules;
DROP TABLE pull_comments;
DROP TABLE pull_reviews;
DROP INDEX builds_pull;
ALTER TABLE builds DROP COLUMN pull_head_sha;
ALTER TABLE builds DROP COLUMN pull_number;
DROP TABLE pull_requests;
