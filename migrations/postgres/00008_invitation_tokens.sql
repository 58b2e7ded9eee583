-- +goose Up
-- Email invitations are claimed with a secret from the email itself: sign-up does not verify
-- addresses, so matching the invitee by email would let anyone register an invited address.
ALTER TABLE org_invitations ADD COLUMN token_hash TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE org_invitations DROP COLUMN token_hash;
