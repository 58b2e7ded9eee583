package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// TestTrailingDataAfterJSONBodyCreatesNoOrg: trailing data after a JSON body used to be
// accepted and the org created. POST /api/v1/orgs with {"name":"x1"}} answered 201 and created
// org x1: the body decoder's check for "nothing after the object" (json.Decoder.More) reports
// false before a stray '}' or ']', so those trailers passed as the end of the body. Every body
// with anything but whitespace after its one JSON object must be a 400 bad_request envelope that
// writes nothing; afterwards the same name in a clean body still creates the org, so the 400s
// were about the trailer and not the name.
func TestTrailingDataAfterJSONBodyCreatesNoOrg(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if dialect == "postgres" {
				env["NIMBUS_DATABASE_URL"] = storetest.PostgresURL(t)
			}
			s := apptest.Start(t, env, app.Options{})
			token := s.Token(t, s.Signup(t, "alice"), auth.ScopeOrgWrite)
			post := func(body string) (int, []byte) {
				t.Helper()
				req, err := http.NewRequest(http.MethodPost, s.URL+"/api/v1/orgs", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				res, err := s.HTTP.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				return res.StatusCode, b
			}
			rows := func() (orgs, members int64) {
				t.Helper()
				if err := s.App.DB.Model(&org.Org{}).Count(&orgs).Error; err != nil {
					t.Fatal(err)
				}
				if err := s.App.DB.Model(&org.Member{}).Count(&members).Error; err != nil {
					t.Fatal(err)
				}
				return orgs, members
			}

			orgsBefore, membersBefore := rows()
			for _, body := range []string{
				`{"name":"x1"}}`,
				`{"name":"x1"}]`,
				`{"name":"x1"}` + "\n}",
				`{"name":"x1"} {"name":"x2"}`,
				`{"name":"x1"}{"name":"x2"}`,
				`{"name":"x1"} trailing garbage`,
				`{"name":"x1"},`,
			} {
				status, b := post(body)
				var env api.Envelope
				if err := json.Unmarshal(b, &env); status != http.StatusBadRequest || err != nil || env.Error == nil ||
					env.Error.Code != fault.CodeBadRequest {
					t.Errorf("POST /api/v1/orgs %q: %d %s, want 400 with code %q", body, status, b, fault.CodeBadRequest)
				}
			}
			if o, m := rows(); o != orgsBefore || m != membersBefore {
				t.Errorf("refused bodies wrote rows: orgs %d → %d, members %d → %d", orgsBefore, o, membersBefore, m)
			}
			if o, err := s.App.Orgs.ByName(t.Context(), "x1"); err == nil {
				t.Errorf("org x1 exists after only refused requests: %+v", o)
			}

			// Whitespace after the object is no trailer, and the name was free all along.
			if status, b := post(" {\"name\":\"x1\"} \r\n\t"); status != http.StatusCreated {
				t.Fatalf("clean body: %d %s, want 201", status, b)
			}
			if o, _ := rows(); o != orgsBefore+1 {
				t.Errorf("orgs after the clean body: %d, want %d", o, orgsBefore+1)
			}
		})
	}
}
