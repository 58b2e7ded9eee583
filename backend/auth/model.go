// Package auth owns people and their credentials: users, sessions and tokens.
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
