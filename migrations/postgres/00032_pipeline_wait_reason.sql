-- +goose Up
-- Why a leased pipeline has not started running yet, as its agent says (a Kubernetes pod
-- Pending for capacity: "waiting for a node with a free nvidia.com/gpu (…)"); '' when it does
-- not wait. Shown as the pipeline's `capacity` blocker.
ALTER TABLE pipelines ADD COLUMN wait_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE pipelines DROP COLUMN wait_reason;
