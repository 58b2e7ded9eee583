-- +goose Up
-- When a workspace pipeline's environment became ready to enter (its agent's workspace_ready
-- event); NULL for builds, and for workspaces still starting.
ALTER TABLE pipelines ADD COLUMN ready_at DATETIME;
-- Workspace pipelines (the vscode event, or services: vscode) are told apart from builds.
ALTER TABLE pipelines ADD COLUMN workspace BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE pipelines DROP COLUMN workspace;
ALTER TABLE pipelines DROP COLUMN ready_at;
