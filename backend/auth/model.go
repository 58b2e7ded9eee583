// Package auth owns people and their credentials: users, passwords, browser sessions (with CSRF
// tokens), personal access tokens with scopes, password resets and login rate limits. Its
// middleware turns every request into a Principal — the one way the rest of the backend learns
// who is calling — and its handlers serve /api/v1/auth/* and /api/v1/user/*.
//
// Secrets are never stored: session ids and tokens are kept as SHA-256 hashes (they are long
// random strings, so a fast hash is enough), passwords as argon2id hashes.
package auth

import "time"

// User is one person's account. The first user of an install becomes its platform admin.
type User struct {
	ID           int64     `gorm:"primaryKey"`
	Username     string    `gorm:"not null"`
	Email        string    `gorm:"not null"`
	PasswordHash string    `gorm:"not null"`
	IsAdmin      bool      `gorm:"not null;default:false"`
	CreatedAt    time.Time `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

// Session is a browser login. ID is the SHA-256 of the cookie value.
type Session struct {
	ID         string    `gorm:"primaryKey"`
	UserID     int64     `gorm:"not null"`
	CSRFToken  string    `gorm:"not null"`
	CreatedAt  time.Time `gorm:"not null"`
	ExpiresAt  time.Time `gorm:"not null"`
	LastSeenAt time.Time `gorm:"not null"`
}

// AccessToken is a personal access token. Prefix is the start of the token, kept so people can
// tell their tokens apart without the secret.
type AccessToken struct {
	ID         int64      `gorm:"primaryKey"`
	UserID     int64      `gorm:"not null"`
	Name       string     `gorm:"not null"`
	TokenHash  string     `gorm:"not null"`
	Prefix     string     `gorm:"not null"`
	Scopes     string     `gorm:"not null"` // space-separated
	ExpiresAt  *time.Time // nil = never
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	CreatedAt  time.Time `gorm:"not null"`
}

// PasswordReset is an emailed one-time reset link.
type PasswordReset struct {
	ID        int64     `gorm:"primaryKey"`
	UserID    int64     `gorm:"not null"`
	TokenHash string    `gorm:"not null"`
	ExpiresAt time.Time `gorm:"not null"`
	UsedAt    *time.Time
	CreatedAt time.Time `gorm:"not null"`
}
