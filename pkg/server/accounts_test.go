package server

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func TestAccountService(t *testing.T) {
	h := newSecHarness(t, nil)
	root := h.do(http.MethodGet, "/redfish/v1", cred{}, "")
	assert.Equal(t, redfish.AccountServiceURI, root.json["AccountService"].(map[string]any)["@odata.id"])

	r := h.do(http.MethodGet, redfish.AccountServiceURI, basic("viewer"), "")
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, redfish.TypeAccountService, r.json["@odata.type"])
	assert.Equal(t, redfish.AccountsURI, r.json["Accounts"].(map[string]any)["@odata.id"])
	assert.Equal(t, redfish.RolesURI, r.json["Roles"].(map[string]any)["@odata.id"])
	assert.Equal(t, float64(5), r.json["AccountLockoutThreshold"])
	assert.Equal(t, float64(600), r.json["AccountLockoutDuration"])
	assert.Equal(t, float64(72), r.json["MaxPasswordLength"])
	assert.NotEmpty(t, r.hdr.Get("ETag"))
}

func TestRolesArePredefinedWithStandardPrivileges(t *testing.T) {
	h := newSecHarness(t, nil)
	want := map[string][]string{
		"Administrator": {"ConfigureComponents", "ConfigureManager", "ConfigureSelf", "ConfigureUsers", "Login"},
		"Operator":      {"ConfigureComponents", "ConfigureSelf", "Login"},
		"ReadOnly":      {"ConfigureSelf", "Login"},
	}
	coll := h.do(http.MethodGet, redfish.RolesURI, basic("viewer"), "")
	require.Equal(t, http.StatusOK, coll.code)
	assert.ElementsMatch(t, []string{redfish.RolesURI + "/Administrator", redfish.RolesURI + "/Operator", redfish.RolesURI + "/ReadOnly"}, members(t, coll.json))
	for id, privs := range want {
		r := h.do(http.MethodGet, redfish.RolesURI+"/"+id, basic("alice"), "")
		require.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, redfish.TypeRole, r.json["@odata.type"])
		assert.Equal(t, id, r.json["Id"])
		assert.Equal(t, id, r.json["RoleId"])
		assert.Equal(t, true, r.json["IsPredefined"])
		var got []string
		for _, p := range r.json["AssignedPrivileges"].([]any) {
			got = append(got, p.(string))
		}
		sort.Strings(got)
		assert.Equal(t, privs, got, id)

		p := h.do(http.MethodPatch, redfish.RolesURI+"/"+id, basic("admin"), `{"AssignedPrivileges":["Login","ConfigureUsers"]}`)
		assert.Equal(t, http.StatusMethodNotAllowed, p.code)
		assert.Equal(t, "GET, HEAD", p.hdr.Get("Allow"))
	}
	assert.Equal(t, http.StatusNotFound, h.do(http.MethodGet, redfish.RolesURI+"/Superuser", basic("admin"), "").code)
}

func TestAccountsShowOnlyWhatTheCallerMaySee(t *testing.T) {
	h := newSecHarness(t, nil)
	all := []string{"admin", "alice", "bob", "tadmin", "viewer"}
	visible := map[string][]string{
		"admin":  all,                 // Administrator of every tenant
		"tadmin": {"alice", "tadmin"}, // Administrator of tenant-a: tenant-a accounts only
		"alice":  {"alice"},           // Operator: itself
		"bob":    {"bob"},             // Operator of tenant-b: never learns of tenant-a
		"viewer": {"viewer"},          // ReadOnly: itself
	}
	for caller, want := range visible {
		t.Run(caller, func(t *testing.T) {
			coll := h.do(http.MethodGet, redfish.AccountsURI, basic(caller), "")
			require.Equal(t, http.StatusOK, coll.code)
			var wantURIs []string
			for _, u := range want {
				wantURIs = append(wantURIs, redfish.AccountsURI+"/"+u)
			}
			assert.Equal(t, wantURIs, members(t, coll.json))
			for _, u := range all {
				r := h.do(http.MethodGet, redfish.AccountsURI+"/"+u, basic(caller), "")
				if !contains(want, u) {
					missing := h.do(http.MethodGet, redfish.AccountsURI+"/"+strings.Repeat("z", len(u)), basic(caller), "")
					assert.Equal(t, http.StatusNotFound, r.code, "%s sees %s", caller, u)
					assert.Equal(t, string(missing.body), strings.ReplaceAll(string(r.body), u, strings.Repeat("z", len(u))),
						"an account the caller may not see looks like one that does not exist")
					continue
				}
				require.Equal(t, http.StatusOK, r.code)
				assert.Equal(t, redfish.TypeManagerAccount, r.json["@odata.type"])
				assert.Equal(t, u, r.json["Id"])
				assert.Equal(t, u, r.json["UserName"])
				assert.Contains(t, r.json, "Password")
				assert.Nil(t, r.json["Password"], "the password is never shown")
				assert.Equal(t, h.cfg.Users[u].Role, r.json["RoleId"])
				assert.Equal(t, true, r.json["Enabled"])
				assert.Equal(t, false, r.json["Locked"])
				assert.Equal(t, []any{"Redfish"}, r.json["AccountTypes"])
				assert.Equal(t, redfish.RolesURI+"/"+h.cfg.Users[u].Role, r.json["Links"].(map[string]any)["Role"].(map[string]any)["@odata.id"])
				assert.NotEmpty(t, r.hdr.Get("ETag"))
				assert.NotContains(t, string(r.body), "$2a$", "no hash either")
				assert.NotContains(t, string(r.body), h.cfg.Users[u].Fingerprint)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestAccountChangesAreRefused(t *testing.T) {
	h := newSecHarness(t, nil)
	tests := []struct {
		method, path, body string
	}{
		{http.MethodPost, redfish.AccountsURI, `{"UserName":"rfpv1234","Password":"Secret-1","RoleId":"ReadOnly"}`},
		{http.MethodPatch, redfish.AccountsURI + "/alice", `{"Password":"Another-1"}`},
		{http.MethodPatch, redfish.AccountsURI + "/admin", `{"RoleId":"ReadOnly"}`},
		{http.MethodDelete, redfish.AccountsURI + "/alice", ""},
		{http.MethodPut, redfish.AccountsURI + "/alice", `{"UserName":"alice"}`},
		{http.MethodPatch, redfish.AccountServiceURI, `{"AccountLockoutThreshold":0}`},
		{http.MethodPost, redfish.RolesURI, `{"RoleId":"Custom"}`},
		{http.MethodDelete, redfish.RolesURI + "/ReadOnly", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			for _, user := range []string{"admin", "alice"} {
				r := h.do(tc.method, tc.path, basic(user), tc.body)
				assert.Equal(t, http.StatusMethodNotAllowed, r.code, "%s: %s", user, r.body)
				assert.Equal(t, "GET, HEAD", r.hdr.Get("Allow"))
				assert.Equal(t, []string{reg + "OperationNotAllowed"}, errCodes(r))
				assert.Contains(t, r.json["error"].(map[string]any)["message"], "kubevirt-redfish configuration")
				assert.NotContains(t, string(r.body), "Secret-1")
				assert.NotContains(t, string(r.body), "Another-1")
			}
			assert.Equal(t, http.StatusUnauthorized, h.do(tc.method, tc.path, cred{}, tc.body).code, "authentication comes first")
		})
	}
	// Still the same passwords.
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, redfish.AccountsURI+"/alice", basic("alice"), "").code)
	h.assertNoSecretsLogged("Secret-1", "Another-1")
}
