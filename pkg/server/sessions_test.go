package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	testingclock "k8s.io/utils/clock/testing"
)

// secPasswords are the accounts of the security tests: admin (Administrator, all tenants),
// tadmin (Administrator, tenant-a), alice (Operator, tenant-a), bob (Operator, tenant-b) and
// viewer (ReadOnly, all tenants).
var secPasswords = map[string]string{
	"admin": "admin-pw", "tadmin": "tadmin-pw", "alice": "alice-pw", "bob": "bob-pw", "viewer": "viewer-pw",
}

const sessionNS = "kubevirt-redfish"

func secConfig(t testing.TB, mod func(*config.File)) *config.Config {
	t.Helper()
	hash := func(user string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(secPasswords[user]), bcrypt.MinCost)
		require.NoError(t, err)
		return string(h)
	}
	f := config.File{
		Allowlist: []config.EntryFile{{Namespace: "tenant-a"}, {Namespace: "tenant-b"}},
		Users: []config.UserFile{
			{Username: "admin", Role: config.RoleAdministrator, PasswordHash: hash("admin"), Allow: []string{"*"}},
			{Username: "tadmin", Role: config.RoleAdministrator, PasswordHash: hash("tadmin"), Allow: []string{"tenant-a"}},
			{Username: "alice", Role: config.RoleOperator, PasswordHash: hash("alice"), Allow: []string{"tenant-a"}},
			{Username: "bob", Role: config.RoleOperator, PasswordHash: hash("bob"), Allow: []string{"tenant-b"}},
			{Username: "viewer", Role: config.RoleReadOnly, PasswordHash: hash("viewer"), Allow: []string{"*"}},
		},
	}
	if mod != nil {
		mod(&f)
	}
	cfg, err := f.Compile()
	require.NoError(t, err)
	return cfg
}

// secHarness is a server with a session store over the demo cluster, whose log is recorded.
type secHarness struct {
	t      *testing.T
	dyn    dynamic.Interface
	cfg    *config.Config
	server *Server
	store  *sessions.Store
	http   *httptest.Server
	logs   *observer.ObservedLogs
	clock  *testingclock.FakeClock
}

func newSecHarness(t *testing.T, mod func(*config.File)) *secHarness {
	t.Helper()
	dyn, err := sim.NewDemoCluster()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := secConfig(t, mod)
	h := &secHarness{t: t, dyn: dyn, cfg: cfg, clock: testingclock.NewFakeClock(time.Now())}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	log := zap.New(core)
	client := kubevirt.NewClient(dyn, cfg.Namespaces(), zap.NewNop())
	require.NoError(t, client.Start(ctx))
	h.store = sessions.New(dyn, sessions.Options{Namespace: sessionNS, Timeout: cfg.Sessions.Timeout,
		MaxLifetime: cfg.Sessions.MaxLifetime, MaxPerUser: cfg.Sessions.MaxPerUser, Now: h.clock.Now})
	require.NoError(t, h.store.Start(ctx))
	h.server = New(cfg, client, log, WithSessions(h.store))
	h.http = httptest.NewServer(h.server)
	t.Cleanup(h.http.Close)
	return h
}

// cred is how a request authenticates.
type cred struct {
	user, pass, token string
	xff               string // X-Forwarded-For
}

func basic(user string) cred              { return cred{user: user, pass: secPasswords[user]} }
func withToken(token string) cred         { return cred{token: token} }
func (c cred) from(xff string) cred       { c.xff = xff; return c }
func wrong(user string) cred              { return cred{user: user, pass: "not-" + secPasswords[user]} }
func (h *secHarness) url(p string) string { return h.http.URL + p }

type reply struct {
	code int
	hdr  http.Header
	body []byte
	json map[string]any
}

func (h *secHarness) do(method, path string, c cred, body string) reply {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url(path), rd)
	require.NoError(h.t, err)
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	if c.xff != "" {
		req.Header.Set("X-Forwarded-For", c.xff)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	r := reply{code: resp.StatusCode, hdr: resp.Header, body: b}
	if len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(h.t, json.Unmarshal(b, &r.json), "%s", b)
	}
	return r
}

// login opens a session the way sushy does and returns the token and the session URI.
func (h *secHarness) login(user, pass string) (string, string) {
	h.t.Helper()
	r := h.do(http.MethodPost, redfish.SessionsURI, cred{}, `{"UserName":"`+user+`","Password":"`+pass+`"}`)
	require.Equal(h.t, http.StatusCreated, r.code, "%s", r.body)
	return r.hdr.Get("X-Auth-Token"), r.hdr.Get("Location")
}

// assertNoSecretsLogged checks that no password or token ever reached the log.
func (h *secHarness) assertNoSecretsLogged(secrets ...string) {
	h.t.Helper()
	for _, p := range secPasswords {
		secrets = append(secrets, p)
	}
	for _, e := range h.logs.All() {
		b, err := json.Marshal(e.ContextMap())
		require.NoError(h.t, err)
		line := e.Message + " " + string(b)
		for _, s := range secrets {
			if s != "" {
				assert.NotContains(h.t, line, s, "a secret reached the log")
			}
		}
	}
}

func errCodes(r reply) []string {
	var out []string
	errObj, _ := r.json["error"].(map[string]any)
	infos, _ := errObj["@Message.ExtendedInfo"].([]any)
	for _, i := range infos {
		out = append(out, i.(map[string]any)["MessageId"].(string))
	}
	return out
}

func TestSessionLogin(t *testing.T) {
	h := newSecHarness(t, nil)
	for _, path := range []string{redfish.SessionsURI, redfish.SessionsURI + "/Members", redfish.SessionsURI + "/"} {
		t.Run(path, func(t *testing.T) {
			r := h.do(http.MethodPost, path, cred{}, `{"UserName":"alice","Password":"alice-pw"}`)
			require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
			token := r.hdr.Get("X-Auth-Token")
			assert.Regexp(t, `^[0-9a-f]{64}$`, token)
			assert.Equal(t, "no-store", r.hdr.Get("Cache-Control"))
			assert.Empty(t, r.hdr.Get("Set-Cookie"))
			loc := r.hdr.Get("Location")
			assert.True(t, strings.HasPrefix(loc, redfish.SessionsURI+"/"), loc)
			assert.Equal(t, loc, r.json["@odata.id"])
			assert.Equal(t, redfish.TypeSession, r.json["@odata.type"])
			assert.Equal(t, "alice", r.json["UserName"])
			assert.Equal(t, "Redfish", r.json["SessionType"])
			assert.Contains(t, r.json, "Password")
			assert.Nil(t, r.json["Password"])
			assert.Equal(t, loc[strings.LastIndex(loc, "/")+1:], r.json["Id"])
			created, err := time.Parse(time.RFC3339, r.json["CreatedTime"].(string))
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now(), created, time.Minute)
			assert.NotContains(t, string(r.body), token)

			// The token alone authenticates, and GETs of the session show the same body.
			got := h.do(http.MethodGet, loc, withToken(token), "")
			require.Equal(t, http.StatusOK, got.code, "%s", got.body)
			assert.JSONEq(t, string(r.body), string(got.body))
			assert.Equal(t, http.StatusOK, h.do(http.MethodGet, "/redfish/v1/Systems/"+cpA0, withToken(token), "").code)
		})
	}
	h.assertNoSecretsLogged()
}

func TestSessionLoginErrors(t *testing.T) {
	h := newSecHarness(t, nil)
	tests := []struct {
		name, body string
		code       int
		ids        []string
	}{
		{"empty body", "", 400, []string{"PropertyMissing", "PropertyMissing"}},
		{"no password", `{"UserName":"alice"}`, 400, []string{"PropertyMissing"}},
		{"no user", `{"Password":"alice-pw"}`, 400, []string{"PropertyMissing"}},
		{"password not a string", `{"UserName":"alice","Password":12345}`, 400, []string{"PropertyValueTypeError"}},
		{"user not a string", `{"UserName":["alice"],"Password":"alice-pw"}`, 400, []string{"PropertyValueTypeError"}},
		{"unknown property", `{"UserName":"alice","Password":"alice-pw","Oem":{}}`, 400, []string{"PropertyUnknown"}},
		{"not JSON", `UserName=alice`, 400, []string{"MalformedJSON"}},
		{"not an object", `["alice","alice-pw"]`, 400, []string{"MalformedJSON"}},
		{"wrong password", `{"UserName":"alice","Password":"bob-pw"}`, 401, []string{"NoValidSession"}},
		{"unknown user", `{"UserName":"mallory","Password":"alice-pw"}`, 401, []string{"NoValidSession"}},
		{"empty credentials", `{"UserName":"","Password":""}`, 401, []string{"NoValidSession"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(http.MethodPost, redfish.SessionsURI, cred{}, tc.body)
			require.Equal(t, tc.code, r.code, "%s", r.body)
			var want []string
			for _, id := range tc.ids {
				want = append(want, reg+id)
			}
			assert.ElementsMatch(t, want, errCodes(r))
			assert.Empty(t, r.hdr.Get("X-Auth-Token"))
			for _, secret := range []string{"alice-pw", "bob-pw", "12345"} {
				assert.NotContains(t, string(r.body), secret, "credentials never appear in errors")
			}
			if tc.code == 401 {
				assert.Equal(t, `Basic realm="kubevirt-redfish"`, r.hdr.Get("WWW-Authenticate"))
			}
		})
	}
	// Wrong-password and unknown-user answers are identical, so usernames cannot be probed.
	a := h.do(http.MethodPost, redfish.SessionsURI, cred{}, `{"UserName":"alice","Password":"x"}`)
	b := h.do(http.MethodPost, redfish.SessionsURI, cred{}, `{"UserName":"nobody","Password":"x"}`)
	assert.Equal(t, string(a.body), string(b.body))
	h.assertNoSecretsLogged("12345")
}

func TestTokenTakesPrecedenceOverBasic(t *testing.T) {
	h := newSecHarness(t, nil)
	token, loc := h.login("alice", "alice-pw")

	// A valid token with someone else's Basic credentials acts as the token's user.
	c := withToken(token)
	c.user, c.pass = "admin", "admin-pw"
	assert.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/redfish/v1/Systems/"+cpB0, c, "").code, "alice cannot see tenant-b")

	// An unknown or ended token is 401 even with valid Basic credentials, so that sushy
	// logs in again rather than silently switching identity.
	bad := basic("admin")
	bad.token = strings.Repeat("0", 64)
	r := h.do(http.MethodGet, "/redfish/v1/Systems", bad, "")
	assert.Equal(t, http.StatusUnauthorized, r.code)
	assert.Equal(t, []string{reg + "NoValidSession"}, errCodes(r))

	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, loc, withToken(token), "").code)
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/redfish/v1/Systems", withToken(token), "").code)
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, loc, withToken(token), "").code)
}

func TestSessionsAreTheCallersOwn(t *testing.T) {
	h := newSecHarness(t, nil)
	aliceTok, aliceLoc := h.login("alice", "alice-pw")
	_, aliceLoc2 := h.login("alice", "alice-pw")
	bobTok, bobLoc := h.login("bob", "bob-pw")
	adminTok, _ := h.login("admin", "admin-pw")

	ids := func(c cred) []string { return members(h.t, h.do(http.MethodGet, redfish.SessionsURI, c, "").json) }
	assert.ElementsMatch(t, []string{aliceLoc, aliceLoc2}, ids(withToken(aliceTok)))
	assert.ElementsMatch(t, []string{aliceLoc, aliceLoc2}, ids(basic("alice")), "Basic sees the user's sessions too")
	assert.Equal(t, []string{bobLoc}, ids(withToken(bobTok)))
	assert.Len(t, ids(withToken(adminTok)), 1, "even an Administrator lists only its own sessions")

	// Other users' sessions are 404, exactly like sessions that do not exist.
	for _, c := range []cred{withToken(bobTok), withToken(adminTok), basic("viewer")} {
		got := h.do(http.MethodGet, aliceLoc, c, "")
		missing := h.do(http.MethodGet, redfish.SessionsURI+"/"+strings.Repeat("0", 32), c, "")
		assert.Equal(t, http.StatusNotFound, got.code)
		assert.Equal(t, string(missing.body), strings.ReplaceAll(string(got.body), aliceLoc[len(redfish.SessionsURI)+1:], strings.Repeat("0", 32)))
		assert.Equal(t, http.StatusNotFound, h.do(http.MethodDelete, aliceLoc, c, "").code)
	}
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, "/redfish/v1/Systems", withToken(aliceTok), "").code, "alice's session survived")

	// alice may end her other session with this one; then it is gone everywhere.
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, aliceLoc2, withToken(aliceTok), "").code)
	assert.Equal(t, []string{aliceLoc}, ids(withToken(aliceTok)))
	assert.Equal(t, http.StatusNotFound, h.do(http.MethodDelete, aliceLoc2, withToken(aliceTok), "").code)
}

func TestSessionServiceResource(t *testing.T) {
	h := newSecHarness(t, func(f *config.File) { f.Sessions.Timeout = "10m" })
	r := h.do(http.MethodGet, redfish.SessionServiceURI, basic("viewer"), "")
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, true, r.json["ServiceEnabled"])
	assert.Equal(t, float64(600), r.json["SessionTimeout"])

	// The configuration owns the timeout: PATCH is 405 with Allow and a reason.
	for _, c := range []cred{basic("admin"), basic("viewer")} {
		p := h.do(http.MethodPatch, redfish.SessionServiceURI, c, `{"SessionTimeout":60}`)
		assert.Equal(t, http.StatusMethodNotAllowed, p.code)
		assert.Equal(t, "GET, HEAD", p.hdr.Get("Allow"))
		assert.Equal(t, []string{reg + "OperationNotAllowed"}, errCodes(p))
		assert.Contains(t, string(p.body), "sessions.timeout")
	}
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodPatch, redfish.SessionServiceURI, cred{}, `{"SessionTimeout":60}`).code)

	// GET on the sessions collection needs credentials; POST does not.
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, redfish.SessionsURI, cred{}, "").code)
	assert.Equal(t, "GET, HEAD, POST", h.do(http.MethodGet, redfish.SessionsURI, basic("viewer"), "").hdr.Get("Allow"))
	assert.Equal(t, http.StatusMethodNotAllowed, h.do(http.MethodDelete, redfish.SessionsURI, basic("admin"), "").code)
}

func TestSessionsExpireAndEndWithTheCredential(t *testing.T) {
	h := newSecHarness(t, func(f *config.File) { f.Sessions.Timeout = "5m"; f.Sessions.MaxLifetime = "1h" })
	token, _ := h.login("alice", "alice-pw")
	sys := "/redfish/v1/Systems/" + cpA0

	h.clock.Step(4 * time.Minute)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, sys, withToken(token), "").code, "used before the timeout")
	require.Eventually(t, func() bool {
		u, err := h.dyn.Resource(sessions.SecretResource).Namespace(sessionNS).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(u.Items) == 1 && u.Items[0].GetAnnotations()[sessions.AnnotationLastUsed] == h.clock.Now().UTC().Format(time.RFC3339Nano)
	}, 5*time.Second, 10*time.Millisecond, "the use is recorded in the cluster")
	h.clock.Step(4 * time.Minute)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, sys, withToken(token), "").code, "idle time counts from the last use")
	h.clock.Step(6 * time.Minute)
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, sys, withToken(token), "").code, "idle for longer than the timeout")

	// A password change ends the user's sessions at once, on every replica: they carry the
	// credential's fingerprint.
	token, _ = h.login("alice", "alice-pw")
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, sys, withToken(token), "").code)
	cfg := h.server.cfg.Load()
	users := map[string]*config.User{}
	for k, v := range cfg.Users {
		users[k] = v
	}
	newHash, err := bcrypt.GenerateFromPassword([]byte("alice-new"), bcrypt.MinCost)
	require.NoError(t, err)
	users["alice"] = users["alice"].WithCredential(newHash, "new-fingerprint")
	h.server.SetConfig(cfg.WithUsers(users))
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, sys, withToken(token), "").code)
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, sys, basic("alice"), "").code)
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, sys, cred{user: "alice", pass: "alice-new"}, "").code)
	token, _ = h.login("alice", "alice-new")
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, sys, withToken(token), "").code)

	// A removed user's sessions end too.
	delete(users, "alice")
	h.server.SetConfig(cfg.WithUsers(users))
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, sys, withToken(token), "").code)
}

func TestSessionLimit(t *testing.T) {
	h := newSecHarness(t, func(f *config.File) { f.Sessions.MaxPerUser = 2 })
	h.login("alice", "alice-pw")
	h.login("alice", "alice-pw")
	r := h.do(http.MethodPost, redfish.SessionsURI, cred{}, `{"UserName":"alice","Password":"alice-pw"}`)
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, []string{reg + "SessionLimitExceeded"}, errCodes(r))
	h.login("bob", "bob-pw")
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, "/redfish/v1/Systems", basic("alice"), "").code, "Basic still works")
}

// TestSushyAutoAuth replays what sushy's "auto" authentication does: an unauthenticated GET of
// the service root, a POST to Links.Sessions, every later request with only X-Auth-Token, a
// new login and one retry after a 401, and a DELETE of the session at the end.
func TestSushyAutoAuth(t *testing.T) {
	h := newSecHarness(t, nil)
	root := h.do(http.MethodGet, "/redfish/v1/", cred{}, "")
	require.Equal(t, http.StatusOK, root.code)
	sessionsURI := root.json["Links"].(map[string]any)["Sessions"].(map[string]any)["@odata.id"].(string)

	var token, location string
	logins := 0
	login := func() {
		logins++
		r := h.do(http.MethodPost, sessionsURI, cred{}, `{"UserName":"alice","Password":"alice-pw"}`)
		require.Equal(t, http.StatusCreated, r.code)
		token, location = r.hdr.Get("X-Auth-Token"), r.hdr.Get("Location")
		require.NotEmpty(t, token)
		require.NotEmpty(t, location)
	}
	get := func(path string) reply {
		r := h.do(http.MethodGet, path, withToken(token), "")
		if r.code == http.StatusUnauthorized {
			login()
			r = h.do(http.MethodGet, path, withToken(token), "")
		}
		return r
	}
	login()
	for i := 0; i < 5; i++ {
		require.Equal(t, http.StatusOK, get("/redfish/v1/Systems/"+cpA0).code)
	}
	assert.Equal(t, 1, logins, "the token is reused")

	// The session ends behind sushy's back (expiry, logout elsewhere): one 401, one login.
	h.clock.Step(time.Hour)
	require.Equal(t, http.StatusOK, get("/redfish/v1/Systems/"+cpA0).code)
	assert.Equal(t, 2, logins)
	require.Equal(t, http.StatusOK, get("/redfish/v1/Managers/"+cpA0).code)
	assert.Equal(t, 2, logins)

	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, location, withToken(token), "").code)
	assert.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/redfish/v1/Systems", withToken(token), "").code)
	h.assertNoSecretsLogged(token)
}
