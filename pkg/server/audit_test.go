package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func auditLines(logs *observer.ObservedLogs) []map[string]any {
	var out []map[string]any
	for _, e := range logs.FilterMessage("audit").All() {
		out = append(out, e.ContextMap())
	}
	return out
}

func TestAuditEveryMutatingRequest(t *testing.T) {
	h := newSecHarness(t, nil)
	sys := "/redfish/v1/Systems/" + cpA0
	media := sys + "/VirtualMedia/Cd/Actions/VirtualMedia."

	steps := []struct {
		method, path string
		c            cred
		body         string
		want         map[string]any
	}{
		{http.MethodPost, sys + "/Actions/ComputerSystem.Reset", basic("alice"), `{"ResetType":"ForceOff"}`,
			map[string]any{"user": "alice", "auth": "basic", "action": "ComputerSystem.Reset", "system": cpA0, "status": int64(204), "result": "success",
				"params": map[string]any{"ResetType": "ForceOff"}}},
		{http.MethodPatch, sys, basic("admin"), `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`,
			map[string]any{"user": "admin", "action": "ComputerSystem.Patch", "system": cpA0, "status": int64(200), "result": "success",
				"params": map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}}},
		{http.MethodPost, media + "InsertMedia", basic("alice"),
			`{"Image":"http://127.0.0.1:1/boot.iso?X-Amz-Signature=sig-topsecret","UserName":"image-user-secret","Password":"image-pw-secret"}`,
			map[string]any{"user": "alice", "action": "VirtualMedia.InsertMedia", "system": cpA0,
				"params": map[string]any{"Image": "http://127.0.0.1:1/boot.iso?(redacted)", "UserName": "(redacted)", "Password": "(redacted)"}}},
		{http.MethodPost, media + "EjectMedia", basic("viewer"), "",
			map[string]any{"user": "viewer", "action": "VirtualMedia.EjectMedia", "system": cpA0, "status": int64(403), "result": "failure",
				"error": reg + "InsufficientPrivilege"}},
		{http.MethodPost, "/redfish/v1/Systems/" + cpB0 + "/Actions/ComputerSystem.Reset", basic("alice"), `{"ResetType":"On"}`,
			map[string]any{"user": "alice", "system": cpB0, "status": int64(404), "error": reg + "ResourceNotFound"}},
		{http.MethodPost, sys + "/Actions/ComputerSystem.Reset", cred{}, `{"ResetType":"On"}`,
			map[string]any{"user": "", "status": int64(401), "error": reg + "NoValidSession"}},
		{http.MethodPost, sys + "/Actions/ComputerSystem.Reset", wrong("alice"), `{"ResetType":"On"}`,
			map[string]any{"user": "", "auth": "basic", "status": int64(401)}},
		{http.MethodPost, redfish.SessionsURI, cred{}, `{"UserName":"alice","Password":"wrong-secret"}`,
			map[string]any{"user": "", "login_user": "alice", "action": "Session.Login", "status": int64(401),
				"params": map[string]any{"UserName": "(redacted)", "Password": "(redacted)"}}},
		{http.MethodDelete, "/redfish/v1/Nowhere", basic("admin"), "",
			map[string]any{"status": int64(404), "action": "DELETE (no such resource)"}},
		{http.MethodPatch, redfish.AccountsURI + "/alice", basic("admin"), `{"Password":"new-secret"}`,
			map[string]any{"status": int64(405), "params": map[string]any{"Password": "(redacted)"}}},
	}
	for i, st := range steps {
		before := len(auditLines(h.logs))
		h.do(st.method, st.path, st.c, st.body)
		lines := auditLines(h.logs)
		require.Len(t, lines, before+1, "step %d: exactly one audit line per mutating request", i)
		got := lines[len(lines)-1]
		for k, v := range st.want {
			assert.Equal(t, v, got[k], "step %d (%s %s): %s", i, st.method, st.path, k)
		}
		assert.NotEmpty(t, got["request_id"], "step %d", i)
		assert.Equal(t, "127.0.0.1", got["source"], "step %d", i)
		assert.Equal(t, st.method, got["method"])
	}

	// A session login and logout, with the session id but never the token.
	token, loc := h.login("bob", "bob-pw")
	login := auditLines(h.logs)[len(auditLines(h.logs))-1]
	assert.Equal(t, "bob", login["user"])
	assert.Equal(t, "Session.Login", login["action"])
	id := loc[strings.LastIndex(loc, "/")+1:]
	assert.Equal(t, id, login["session"])
	h.do(http.MethodDelete, loc, withToken(token), "")
	logout := auditLines(h.logs)[len(auditLines(h.logs))-1]
	assert.Equal(t, "Session.Logout", logout["action"])
	assert.Equal(t, "bob", logout["user"])
	assert.Equal(t, "session", logout["auth"])
	assert.Equal(t, id, logout["session"])
	assert.Equal(t, int64(204), logout["status"])

	// Reads are not audited.
	before := len(auditLines(h.logs))
	h.do(http.MethodGet, sys, basic("admin"), "")
	h.do(http.MethodHead, sys, basic("admin"), "")
	assert.Len(t, auditLines(h.logs), before)

	h.assertNoSecretsLogged(token, "sig-topsecret", "image-user-secret", "image-pw-secret", "wrong-secret", "new-secret")
}

func TestAuditParamsRedaction(t *testing.T) {
	got := auditParams("VirtualMedia.InsertMedia", []byte(`{"Image":"https://u:p@h.example/x.iso#frag","UserName":"u","Password":"p",
		"Oem":{"Token":"t","Nested":{"ApiKey":"k","Ok":"fine"}},"List":["https://h.example/a?b=c"]}`))
	assert.Equal(t, map[string]any{
		"Image": "https://h.example/x.iso?(redacted)", "UserName": "(redacted)", "Password": "(redacted)",
		"Oem":  map[string]any{"Token": "(redacted)", "Nested": map[string]any{"ApiKey": "(redacted)", "Ok": "fine"}},
		"List": []any{"https://h.example/a?(redacted)"},
	}, got)
	assert.Equal(t, map[string]any{"(body)": "not JSON"}, auditParams("x", []byte("password=hunter2")))
	assert.Nil(t, auditParams("x", nil))
	long := `{"Image":"http://h/` + strings.Repeat("a", 400) + `"}`
	assert.Less(t, len(auditParams("x", []byte(long)).(map[string]any)["Image"].(string)), 300)
}
