package server

import "github.com/nimbus-build/nimbus/backend/auth"

// Models lists every gorm model of every domain. The schema test checks each against the
// migrated schema of both dialects, so a domain that adds a model adds it here too.
func Models() []any {
	return []any{
		&auth.User{},
	}
}
