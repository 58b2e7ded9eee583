package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	nmail "github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Config tunes the auth service.
type Config struct {
	PublicURL            string
	SessionTTL           time.Duration // default 14 days
	ResetTTL             time.Duration // default 1 hour
	LoginLimitPerAccount int           // failed logins per account per window (default 10)
	LoginLimitPerIP      int           // failed logins per client IP per window (default 50)
	LoginWindow          time.Duration // default 15 minutes
	Passwords            PasswordCost  // default OWASP's minimum; tests: CheapPasswords
}

// Service holds the auth logic.
type Service struct {
	db        *gorm.DB
	rdb       redis.UniversalClient
	clock     clock.Clock
	mail      nmail.Sender
	log       *slog.Logger
	cfg       Config
	resolvers map[string]TokenResolver
}

// TokenResolver authenticates a bearer token of one prefix (deploy tokens, job tokens) for the
// domain that owns it.
type TokenResolver func(ctx context.Context, token string) (*Principal, error)

// NewService returns the auth service.
func NewService(db *gorm.DB, rdb redis.UniversalClient, clk clock.Clock, mailer nmail.Sender, log *slog.Logger, cfg Config) *Service {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 14 * 24 * time.Hour
	}
	if cfg.ResetTTL <= 0 {
		cfg.ResetTTL = time.Hour
	}
	if cfg.LoginLimitPerAccount <= 0 {
		cfg.LoginLimitPerAccount = 10
	}
	if cfg.LoginLimitPerIP <= 0 {
		cfg.LoginLimitPerIP = 50
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = 15 * time.Minute
	}
	return &Service{db: db, rdb: rdb, clock: clk, mail: mailer, log: log, cfg: cfg, resolvers: map[string]TokenResolver{}}
}

// RegisterTokenResolver lets another domain authenticate tokens that start with prefix.
func (s *Service) RegisterTokenResolver(prefix string, r TokenResolver) { s.resolvers[prefix] = r }

var (
	usernameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,37}[A-Za-z0-9])?$`)
	// ErrInvalidCredentials is the one answer to every failed login, whatever failed.
	errInvalidCredentials = fault.Unauthenticated("invalid username, email or password")
)

// ValidUsername reports whether name is a valid username (1–39 characters: letters, digits,
// '-' and '_', starting and ending with a letter or digit).
func ValidUsername(name string) bool { return usernameRE.MatchString(name) }

func normalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || !strings.Contains(email, "@") || len(email) > 254 {
		return "", fault.Invalid("email", "email %q is not a valid address", email)
	}
	return email, nil
}

// Signup creates an account. The first account of an install becomes its platform admin.
func (s *Service) Signup(ctx context.Context, username, email, password string) (*User, error) {
	if !ValidUsername(username) {
		return nil, fault.Invalid("username", "username must be 1–39 letters, digits, '-' or '_', starting and ending with a letter or digit")
	}
	email, err := normalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if msg := CheckPasswordRules(password, username, email); msg != "" {
		return nil, fault.Invalid("password", "%s", msg)
	}
	hash, err := hashPassword(password, s.cfg.Passwords)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	u := &User{Username: username, Email: email, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		// Serialise sign-ups so exactly one first user becomes admin, even when two race.
		if err := store.Lock(tx, "auth:signup"); err != nil {
			return err
		}
		var taken int64
		if err := tx.Model(&User{}).Where("lower(username) = lower(?) OR lower(email) = lower(?)", username, email).Count(&taken).Error; err != nil {
			return err
		}
		if taken > 0 {
			return fault.Conflict("username or email is already registered")
		}
		var count int64
		if err := tx.Model(&User{}).Count(&count).Error; err != nil {
			return err
		}
		u.IsAdmin = count == 0
		return tx.Create(u).Error
	})
	if store.IsUniqueViolation(err) {
		return nil, fault.Conflict("username or email is already registered")
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "user signed up", "user", u.Username, "platform_admin", u.IsAdmin)
	return u, nil
}

// Login checks a username-or-email and password. Failures count against the account and the
// client IP; past the limit, attempts are refused with 429 until the window passes, even with
// the right password.
func (s *Service) Login(ctx context.Context, login, password, ip string) (*User, error) {
	login = strings.TrimSpace(login)
	if login == "" || password == "" {
		return nil, fault.Invalid("", "login and password are required")
	}
	acctKey := "nimbus:ratelimit:login:acct:" + strings.ToLower(login)
	ipKey := "nimbus:ratelimit:login:ip:" + ip
	if wait, err := s.limited(ctx, acctKey, s.cfg.LoginLimitPerAccount); err != nil {
		return nil, err
	} else if wait > 0 {
		return nil, tooMany(wait)
	}
	if wait, err := s.limited(ctx, ipKey, s.cfg.LoginLimitPerIP); err != nil {
		return nil, err
	} else if wait > 0 {
		return nil, tooMany(wait)
	}
	var u User
	err := s.db.WithContext(ctx).Where("lower(username) = lower(?) OR lower(email) = lower(?)", login, login).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		checkPassword(dummyHash(s.cfg.Passwords), password) // same cost as a real check: no user enumeration by timing
		s.fail(ctx, acctKey, ipKey)
		return nil, errInvalidCredentials
	}
	if err != nil {
		return nil, err
	}
	if err := checkPassword(u.PasswordHash, password); err != nil {
		s.fail(ctx, acctKey, ipKey)
		if !errors.Is(err, ErrWrongPassword) {
			s.log.ErrorContext(ctx, "password check failed", "user", u.Username, "err", err)
		}
		return nil, errInvalidCredentials
	}
	s.rdb.Del(ctx, acctKey)
	return &u, nil
}

func tooMany(wait time.Duration) error {
	e := fault.New(fault.KindRateLimited, fault.CodeRateLimited, "too many failed logins; try again in %d seconds", int(wait.Seconds())+1)
	e.Details = map[string]any{"retry_after_seconds": int(wait.Seconds()) + 1}
	return e
}

// limited returns how long to wait when key has reached limit failures in the current window.
func (s *Service) limited(ctx context.Context, key string, limit int) (time.Duration, error) {
	n, err := s.rdb.Get(ctx, key).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("auth: rate limit: %w", err)
	}
	if n < limit {
		return 0, nil
	}
	ttl, err := s.rdb.TTL(ctx, key).Result()
	if err != nil || ttl <= 0 {
		ttl = s.cfg.LoginWindow
	}
	return ttl, nil
}

func (s *Service) fail(ctx context.Context, keys ...string) {
	for _, k := range keys {
		n, err := s.rdb.Incr(ctx, k).Result()
		if err != nil {
			s.log.WarnContext(ctx, "rate limit counter", "err", err)
			continue
		}
		if n == 1 {
			s.rdb.Expire(ctx, k, s.cfg.LoginWindow)
		}
	}
}

// CreateSession starts a browser session and returns the cookie value.
func (s *Service) CreateSession(ctx context.Context, userID int64) (string, *Session, error) {
	raw, err := NewToken("")
	if err != nil {
		return "", nil, err
	}
	csrf, err := NewToken("")
	if err != nil {
		return "", nil, err
	}
	now := s.clock.Now().UTC()
	sess := &Session{ID: HashToken(raw), UserID: userID, CSRFToken: csrf, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL), LastSeenAt: now}
	if err := s.db.WithContext(ctx).Create(sess).Error; err != nil {
		return "", nil, err
	}
	return raw, sess, nil
}

// Logout ends a session.
func (s *Service) Logout(ctx context.Context, sessionID string) error {
	return s.db.WithContext(ctx).Where("id = ?", sessionID).Delete(&Session{}).Error
}

// ChangePassword sets a new password after checking the current one and ends every other
// session of the user.
func (s *Service) ChangePassword(ctx context.Context, u *User, current, next, keepSession string) error {
	if err := checkPassword(u.PasswordHash, current); err != nil {
		return fault.Invalid("current_password", "current password is wrong")
	}
	if msg := CheckPasswordRules(next, u.Username, u.Email); msg != "" {
		return fault.Invalid("new_password", "%s", msg)
	}
	return s.setPassword(ctx, s.db, u, next, keepSession)
}

// setPassword stores a new password (already checked against the rules) and ends every session
// of the user but keepSession.
func (s *Service) setPassword(ctx context.Context, db *gorm.DB, u *User, next, keepSession string) error {
	hash, err := hashPassword(next, s.cfg.Passwords)
	if err != nil {
		return err
	}
	return store.Tx(ctx, db, func(tx *gorm.DB) error {
		if err := tx.Model(&User{}).Where("id = ?", u.ID).Updates(map[string]any{"password_hash": hash, "updated_at": s.clock.Now().UTC()}).Error; err != nil {
			return err
		}
		return tx.Where("user_id = ? AND id <> ?", u.ID, keepSession).Delete(&Session{}).Error
	})
}

// RequestPasswordReset emails a one-time link when email belongs to an account. It answers the
// same either way, so it cannot be used to find out who has an account.
func (s *Service) RequestPasswordReset(ctx context.Context, email string) error {
	var u User
	err := s.db.WithContext(ctx).Where("lower(email) = lower(?)", strings.TrimSpace(email)).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	token, err := NewToken("")
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	if err := s.db.WithContext(ctx).Create(&PasswordReset{UserID: u.ID, TokenHash: HashToken(token), ExpiresAt: now.Add(s.cfg.ResetTTL), CreatedAt: now}).Error; err != nil {
		return err
	}
	link := s.cfg.PublicURL + "/reset-password?token=" + token
	err = s.mail.Send(ctx, nmail.Message{To: u.Email, Subject: "Reset your Nimbus password",
		Body: "Someone asked to reset the password of the Nimbus account " + u.Username + ".\n\n" +
			"Open this link within " + s.cfg.ResetTTL.String() + " to choose a new password:\n" + link +
			"\n\nIf it was not you, ignore this email; your password stays as it is.\n"})
	if err != nil {
		// Logged, not returned: an error only for existing accounts would tell who has one.
		s.log.ErrorContext(ctx, "password reset email failed", "err", err)
	}
	return nil
}

// ResetPassword sets a new password with a reset token, once, and ends every session.
func (s *Service) ResetPassword(ctx context.Context, token, next string) error {
	bad := fault.Invalid("token", "the reset link is invalid, used or expired; ask for a new one")
	var pr PasswordReset
	err := s.db.WithContext(ctx).Where("token_hash = ?", HashToken(token)).Take(&pr).Error
	now := s.clock.Now().UTC()
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && (pr.UsedAt != nil || now.After(pr.ExpiresAt))) {
		return bad
	}
	if err != nil {
		return err
	}
	var u User
	if err := s.db.WithContext(ctx).Take(&u, pr.UserID).Error; err != nil {
		return err
	}
	if msg := CheckPasswordRules(next, u.Username, u.Email); msg != "" {
		return fault.Invalid("password", "%s", msg)
	}
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		// Claiming the link and setting the password commit together: of two concurrent uses of
		// one link, exactly one wins.
		res := tx.Model(&PasswordReset{}).Where("id = ? AND used_at IS NULL", pr.ID).Update("used_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return bad
		}
		return s.setPassword(ctx, tx, &u, next, "")
	})
}

// UserByName finds a user by username, case-insensitively.
func (s *Service) UserByName(ctx context.Context, username string) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Where("lower(username) = lower(?)", username).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("user %q not found", username)
	}
	return &u, err
}

// UserByEmail finds a user by email, case-insensitively.
func (s *Service) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Where("lower(email) = lower(?)", email).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("no user with that email")
	}
	return &u, err
}

// UserByID finds a user by id.
func (s *Service) UserByID(ctx context.Context, id int64) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Take(&u, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("user not found")
	}
	return &u, err
}

// AdminUsernames lists the platform admins' usernames, oldest account first: who a team asks
// for credit when the installation takes no payments.
func (s *Service) AdminUsernames(ctx context.Context) ([]string, error) {
	out := []string{}
	err := s.db.WithContext(ctx).Model(&User{}).Where("is_admin = ?", true).Order("id").Limit(20).Pluck("username", &out).Error
	return out, err
}

// Usernames maps user ids to usernames, in one query; ids of deleted users are absent.
func (s *Service) Usernames(ctx context.Context, ids []int64) (map[int64]string, error) {
	var rows []struct {
		ID       int64
		Username string
	}
	if err := s.db.WithContext(ctx).Model(&User{}).Select("id, username").Where("id IN ?", ids).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Username
	}
	return out, nil
}

// SetAdmin grants or revokes the platform-admin flag (used by `nimbus-server admin`).
func (s *Service) SetAdmin(ctx context.Context, username string, admin bool) error {
	res := s.db.WithContext(ctx).Model(&User{}).Where("lower(username) = lower(?)", username).Update("is_admin", admin)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("user %q not found", username)
	}
	return nil
}
