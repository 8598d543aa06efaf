package integration

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// The security tests' accounts. Every one has the password secPassword(user).
type account struct {
	user, role string
	allow      []string
}

var secAccounts = []account{
	{"admin", config.RoleAdministrator, []string{"*"}},
	{"tenant-a-admin", config.RoleAdministrator, []string{"tenant-a"}},
	{"alice", config.RoleOperator, []string{"tenant-a"}},
	{"bob", config.RoleOperator, []string{"tenant-b"}},
	{"reader", config.RoleReadOnly, []string{"*"}},
	{"reader-b", config.RoleReadOnly, []string{"tenant-b"}},
}

func secPassword(user string) string { return "pw-of-" + user }

// secConfig is the configuration of the security tests; mod adds to it.
func secConfig(t *testing.T, mod func(*config.File)) *config.Config {
	t.Helper()
	f := config.File{
		Listen:    "127.0.0.1:0",
		Allowlist: []config.EntryFile{{Name: "tenant-a", Namespace: "tenant-a"}, {Name: "tenant-b", Namespace: "tenant-b"}},
	}
	for _, a := range secAccounts {
		h, err := bcrypt.GenerateFromPassword([]byte(secPassword(a.user)), bcrypt.MinCost)
		require.NoError(t, err)
		f.Users = append(f.Users, config.UserFile{Username: a.user, Role: a.role, PasswordHash: string(h), Allow: a.allow})
	}
	if mod != nil {
		mod(&f)
	}
	cfg, err := f.Compile()
	require.NoError(t, err)
	return cfg
}

// auth is how a request authenticates: Basic (user, pass), a token, or nothing.
type auth struct {
	user, pass, token, xff string
}

func basicAs(user string) auth  { return auth{user: user, pass: secPassword(user)} }
func tokenAuth(tok string) auth { return auth{token: tok} }

type resp struct {
	code int
	hdr  http.Header
	body []byte
	doc  map[string]any
}

func send(t *testing.T, base, method, path string, a auth, body string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	if a.token != "" {
		req.Header.Set("X-Auth-Token", a.token)
	}
	if a.xff != "" {
		req.Header.Set("X-Forwarded-For", a.xff)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	out := resp{code: r.StatusCode, hdr: r.Header, body: b}
	if len(b) > 0 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(b, &out.doc), "%s", b)
	}
	return out
}

// loginAt opens a session like sushy: POST the credentials, no other authentication.
func loginAt(t *testing.T, base, user, pass string) (token, location string) {
	t.Helper()
	r := send(t, base, http.MethodPost, "/redfish/v1/SessionService/Sessions", auth{}, fmt.Sprintf(`{"UserName":%q,"Password":%q}`, user, pass))
	require.Equal(t, http.StatusCreated, r.code, "login of %s: %s", user, r.body)
	token, location = r.hdr.Get("X-Auth-Token"), r.hdr.Get("Location")
	require.NotEmpty(t, token)
	require.NotEmpty(t, location)
	return token, location
}

func mayUse(a account, system string) bool {
	ns, _, _ := strings.Cut(system, ".")
	for _, e := range a.allow {
		if e == "*" || e == ns {
			return true
		}
	}
	return false
}

// matrixOp is one request of the matrix, for one system id.
type matrixOp struct {
	name, method, path, body string
	write                    bool // needs Operator or Administrator
	ok                       int  // the answer when allowed
}

func systemOps(id string) []matrixOp {
	sys, mgr := "/redfish/v1/Systems/"+id, "/redfish/v1/Managers/"+id
	media := sys + "/VirtualMedia/Cd"
	return []matrixOp{
		{"GET System", http.MethodGet, sys, "", false, 200},
		{"HEAD System", http.MethodHead, sys, "", false, 200},
		// UEFI is the demo VMs' mode already: a real PATCH that changes nothing.
		{"PATCH System", http.MethodPatch, sys, `{"Boot":{"BootSourceOverrideMode":"UEFI"}}`, true, 200},
		{"Reset", http.MethodPost, sys + "/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`, true, 204},
		{"GET System VirtualMedia", http.MethodGet, sys + "/VirtualMedia", "", false, 200},
		{"GET VirtualMedia Cd", http.MethodGet, media, "", false, 200},
		// An ftp:// image is refused after authorization: 400 proves the request got past
		// the allowlist and the role check without importing anything.
		{"InsertMedia", http.MethodPost, media + "/Actions/VirtualMedia.InsertMedia", `{"Image":"ftp://images.example/boot.iso"}`, true, 400},
		{"EjectMedia", http.MethodPost, media + "/Actions/VirtualMedia.EjectMedia", "", true, 204},
		{"GET Manager", http.MethodGet, mgr, "", false, 200},
		{"GET Manager VirtualMedia", http.MethodGet, mgr + "/VirtualMedia", "", false, 200},
		{"GET Chassis", http.MethodGet, "/redfish/v1/Chassis/" + id, "", false, 200},
	}
}

// TestSecurityMatrix checks users × roles × tenants × resources × methods against a real
// apiserver. A system of another tenant answers exactly like one that does not exist.
func TestSecurityMatrix(t *testing.T) {
	s := stack.Start(t, stack.Options{Config: secConfig(t, nil)})
	base := s.URL
	systems := []string{"tenant-a.cp-0", "tenant-b.cp-0"}
	// Ids of the same length as tenant-a.cp-0 / tenant-b.cp-0 that do not exist: one in an
	// allowlisted namespace, one in a namespace outside the allowlist.
	missing := map[string]string{"tenant-a.cp-0": "tenant-a.cp-9", "tenant-b.cp-0": "tenant-b.cp-9"}
	const outside = "tenant-c.cp-0"

	// A media import on tenant-b gives tenant-b a Task.
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1048576")
		if r.Method == http.MethodGet {
			_, _ = w.Write(make([]byte, 1<<20))
		}
	}))
	defer img.Close()
	r := send(t, base, http.MethodPost, "/redfish/v1/Systems/tenant-b.cp-0/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		basicAs("admin"), `{"Image":"`+img.URL+`/boot.iso"}`)
	require.Equal(t, http.StatusNoContent, r.code, "%s", r.body)
	tasks := members(t, send(t, base, http.MethodGet, "/redfish/v1/TaskService/Tasks", basicAs("admin"), "").doc)
	require.NotEmpty(t, tasks)

	table := map[string]map[string]string{} // op -> user -> codes
	record := func(op, user string, code int) {
		if table[op] == nil {
			table[op] = map[string]string{}
		}
		if prev := table[op][user]; prev != "" && !strings.Contains(prev, fmt.Sprint(code)) {
			table[op][user] = prev + "/" + fmt.Sprint(code)
		} else if prev == "" {
			table[op][user] = fmt.Sprint(code)
		}
	}

	// Tasks: only the tenant's own (checked for everyone before any EjectMedia ends the
	// import).
	for _, a := range secAccounts {
		c := basicAs(a.user)
		r := send(t, base, http.MethodGet, "/redfish/v1/TaskService/Tasks", c, "")
		require.Equal(t, 200, r.code)
		if mayUse(a, "tenant-b.x") {
			assert.Equal(t, tasks, members(t, r.doc))
		} else {
			assert.Empty(t, members(t, r.doc))
		}
		for _, task := range tasks {
			want := 404
			if mayUse(a, "tenant-b.x") {
				want = 200
			}
			code := send(t, base, http.MethodGet, task, c, "").code
			assert.Equal(t, want, code, "GET %s as %s", task, a.user)
			record("GET Task (tenant-b)", a.user, code)
		}
	}

	for _, a := range secAccounts {
		a := a
		t.Run(a.user, func(t *testing.T) {
			c := basicAs(a.user)
			// Collections list exactly the systems the user may use.
			for _, coll := range []string{"Systems", "Managers", "Chassis"} {
				var want []string
				for _, id := range []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2", "tenant-b.cp-0"} {
					if mayUse(a, id) {
						want = append(want, "/redfish/v1/"+coll+"/"+id)
					}
				}
				r := send(t, base, http.MethodGet, "/redfish/v1/"+coll, c, "")
				require.Equal(t, 200, r.code)
				assert.Equal(t, want, members(t, r.doc), "%s of %s", coll, a.user)
			}
			for _, sys := range systems {
				tenant := strings.SplitN(sys, ".", 2)[0]
				for i, op := range systemOps(sys) {
					want := op.ok
					switch {
					case !mayUse(a, sys):
						want = 404
					case op.write && a.role == config.RoleReadOnly:
						want = 403
					}
					got := send(t, base, op.method, op.path, c, op.body)
					assert.Equal(t, want, got.code, "%s %s as %s: %s", op.method, op.path, a.user, got.body)
					record(op.name+" ("+tenant+")", a.user, got.code)
					if want != 404 {
						continue
					}
					// Not allowed looks exactly like not there, in the allowlist or outside it.
					for _, other := range []string{missing[sys], outside} {
						m := send(t, base, op.method, systemOps(other)[i].path, c, op.body)
						assert.Equal(t, 404, m.code)
						if op.method != http.MethodHead {
							assert.Equal(t, string(m.body), strings.ReplaceAll(string(got.body), sys, other),
								"%s %s as %s differs from a system that does not exist", op.method, op.path, a.user)
						}
						assert.Equal(t, m.hdr.Get("Content-Length"), got.hdr.Get("Content-Length"))
						assert.Equal(t, m.hdr.Get("Allow"), got.hdr.Get("Allow"))
					}
				}
				// Methods a system does not have are 405 whoever asks, so 405 tells nothing.
				code := send(t, base, http.MethodDelete, "/redfish/v1/Systems/"+sys, c, "").code
				assert.Equal(t, 405, code)
				record("DELETE System ("+tenant+")", a.user, code)
			}

			// Service-level resources.
			others := "bob"
			if a.user == "bob" {
				others = "alice"
			}
			service := []struct {
				name, method, path, body string
				want                     int
			}{
				{"GET SessionService", http.MethodGet, "/redfish/v1/SessionService", "", 200},
				{"PATCH SessionService", http.MethodPatch, "/redfish/v1/SessionService", `{"SessionTimeout":60}`, 405},
				{"GET Sessions", http.MethodGet, "/redfish/v1/SessionService/Sessions", "", 200},
				{"GET AccountService", http.MethodGet, "/redfish/v1/AccountService", "", 200},
				{"PATCH AccountService", http.MethodPatch, "/redfish/v1/AccountService", `{"AccountLockoutThreshold":0}`, 405},
				{"GET Accounts", http.MethodGet, "/redfish/v1/AccountService/Accounts", "", 200},
				{"POST Accounts", http.MethodPost, "/redfish/v1/AccountService/Accounts", `{"UserName":"x","Password":"Xx-12345678","RoleId":"ReadOnly"}`, 405},
				{"GET own Account", http.MethodGet, "/redfish/v1/AccountService/Accounts/" + a.user, "", 200},
				{"PATCH own Account", http.MethodPatch, "/redfish/v1/AccountService/Accounts/" + a.user, `{"Password":"Xx-12345678"}`, 405},
				{"DELETE own Account", http.MethodDelete, "/redfish/v1/AccountService/Accounts/" + a.user, "", 405},
				{"GET other tenant's Account", http.MethodGet, "/redfish/v1/AccountService/Accounts/" + others, "", map[bool]int{true: 200, false: 404}[a.user == "admin"]},
				{"GET Roles", http.MethodGet, "/redfish/v1/AccountService/Roles", "", 200},
				{"GET Role", http.MethodGet, "/redfish/v1/AccountService/Roles/ReadOnly", "", 200},
				{"PATCH Role", http.MethodPatch, "/redfish/v1/AccountService/Roles/ReadOnly", `{"AssignedPrivileges":["Login","ConfigureUsers"]}`, 405},
				{"GET TaskService", http.MethodGet, "/redfish/v1/TaskService", "", 200},
			}
			for _, op := range service {
				got := send(t, base, op.method, op.path, c, op.body)
				assert.Equal(t, op.want, got.code, "%s as %s: %s", op.name, a.user, got.body)
				record(op.name, a.user, got.code)
			}

			// Sessions: login, own session readable and deletable, nobody else's.
			tok, loc := loginAt(t, base, a.user, secPassword(a.user))
			record("POST Sessions (login)", a.user, 201)
			got := send(t, base, http.MethodGet, loc, tokenAuth(tok), "")
			assert.Equal(t, 200, got.code)
			record("GET own Session", a.user, got.code)
			otherTok, otherLoc := loginAt(t, base, others, secPassword(others))
			for _, m := range []string{http.MethodGet, http.MethodDelete} {
				got := send(t, base, m, otherLoc, tokenAuth(tok), "")
				assert.Equal(t, 404, got.code, "%s of %s's session as %s", m, others, a.user)
				record(m+" other user's Session", a.user, got.code)
			}
			got = send(t, base, http.MethodDelete, loc, tokenAuth(tok), "")
			assert.Equal(t, 204, got.code)
			record("DELETE own Session", a.user, got.code)
			assert.Equal(t, 401, send(t, base, http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code)
			assert.Equal(t, 200, send(t, base, http.MethodGet, otherLoc, tokenAuth(otherTok), "").code, "the other session lives on")
			send(t, base, http.MethodDelete, otherLoc, tokenAuth(otherTok), "")
		})
	}

	t.Run("anonymous", func(t *testing.T) {
		for _, p := range []string{"/redfish", "/redfish/v1", "/redfish/v1/", "/redfish/v1/odata", "/redfish/v1/$metadata"} {
			assert.Equal(t, 200, send(t, base, http.MethodGet, p, auth{}, "").code, p)
		}
		var all []matrixOp
		for _, sys := range append(systems, missing["tenant-a.cp-0"]) {
			all = append(all, systemOps(sys)...)
		}
		for _, p := range []string{"/redfish/v1/Systems", "/redfish/v1/Managers", "/redfish/v1/Chassis", "/redfish/v1/TaskService",
			"/redfish/v1/TaskService/Tasks", tasks[0], "/redfish/v1/SessionService", "/redfish/v1/SessionService/Sessions",
			"/redfish/v1/AccountService", "/redfish/v1/AccountService/Accounts", "/redfish/v1/AccountService/Accounts/admin",
			"/redfish/v1/AccountService/Roles", "/redfish/v1/AccountService/Roles/ReadOnly"} {
			all = append(all, matrixOp{method: http.MethodGet, path: p})
		}
		all = append(all, matrixOp{method: http.MethodPatch, path: "/redfish/v1/AccountService/Accounts/admin", body: `{"Password":"x"}`},
			matrixOp{method: http.MethodPost, path: "/redfish/v1/AccountService/Accounts", body: `{}`},
			matrixOp{method: http.MethodDelete, path: "/redfish/v1/SessionService/Sessions/0123"})
		for _, op := range all {
			for _, a := range []auth{{}, {user: "admin", pass: "wrong"}, {user: "nobody", pass: "pw-of-admin"}, {token: strings.Repeat("ab", 32)}} {
				got := send(t, base, op.method, op.path, a, op.body)
				assert.Equal(t, 401, got.code, "%s %s with %+v", op.method, op.path, a.user)
				assert.Equal(t, `Basic realm="kubevirt-redfish"`, got.hdr.Get("WWW-Authenticate"))
			}
			record(op.method+" (any resource)", "anonymous", 401)
		}
	})

	// The matrix as a table, for the record (go test -v).
	var ops []string
	for op := range table {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-36s", "")
	users := []string{}
	for _, a := range secAccounts {
		users = append(users, a.user)
	}
	users = append(users, "anonymous")
	for _, u := range users {
		fmt.Fprintf(&b, " %-14s", u)
	}
	for _, op := range ops {
		fmt.Fprintf(&b, "\n%-36s", op)
		for _, u := range users {
			v := table[op][u]
			if v == "" {
				v = "-"
			}
			fmt.Fprintf(&b, " %-14s", v)
		}
	}
	t.Log(b.String())
}

func members(t *testing.T, doc map[string]any) []string {
	t.Helper()
	ms, ok := doc["Members"].([]any)
	require.True(t, ok, "no Members in %v", doc)
	out := []string{}
	for _, m := range ms {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// TestSessionsAcrossReplicas: a session created on one replica works on another, survives a
// new replica starting, and a logout on one is seen by all. The token is stored nowhere.
func TestSessionsAcrossReplicas(t *testing.T) {
	s := stack.Start(t, stack.Options{Config: secConfig(t, nil)})
	a := s.URL
	b := s.AddReplica(t)

	tok, loc := loginAt(t, a, "alice", secPassword("alice"))
	// B serves it at once: its cache, or the apiserver for a session too new for the cache.
	r := send(t, b.URL, http.MethodGet, "/redfish/v1/Systems/tenant-a.cp-0", tokenAuth(tok), "")
	require.Equal(t, 200, r.code, "%s", r.body)
	assert.Equal(t, 404, send(t, b.URL, http.MethodGet, "/redfish/v1/Systems/tenant-b.cp-0", tokenAuth(tok), "").code)
	eventually(t, "B lists the session", func() bool {
		return strings.Contains(string(send(t, b.URL, http.MethodGet, "/redfish/v1/SessionService/Sessions", tokenAuth(tok), "").body), loc)
	})

	// The session Secret holds the token's hash, never the token.
	list, err := s.Dyn.Resource(sessions.SecretResource).Namespace(stack.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: sessions.LabelSession + "=true"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	raw, err := json.Marshal(list.Items[0].Object)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), tok)
	assert.NotContains(t, string(raw), base64.StdEncoding.EncodeToString([]byte(tok)))
	sum := sha256.Sum256([]byte(tok))
	data := list.Items[0].Object["data"].(map[string]any)
	hash, _ := base64.StdEncoding.DecodeString(data["token-sha256"].(string))
	assert.Equal(t, hex.EncodeToString(sum[:]), string(hash))
	assert.Equal(t, sessions.NamePrefix+loc[strings.LastIndex(loc, "/")+1:], list.Items[0].GetName())

	// A replica started later (a restart) knows the session from the cluster.
	c := s.AddReplica(t)
	assert.Equal(t, 200, send(t, c.URL, http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code)

	// Logout on B: rejected on A and C.
	require.Equal(t, 204, send(t, b.URL, http.MethodDelete, loc, tokenAuth(tok), "").code)
	assert.Equal(t, 401, send(t, b.URL, http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code)
	eventually(t, "A rejects the ended session", func() bool {
		return send(t, a, http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401
	})
	eventually(t, "C rejects the ended session", func() bool {
		return send(t, c.URL, http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401
	})
	assert.Equal(t, 404, send(t, a, http.MethodGet, loc, basicAs("alice"), "").code)

	// No token or password was ever logged by any replica.
	for _, rep := range []*stack.Replica{s.First, b, c} {
		for _, e := range rep.Logs.All() {
			line, _ := json.Marshal(e.ContextMap())
			assert.NotContains(t, e.Message+string(line), tok)
			assert.NotContains(t, e.Message+string(line), secPassword("alice"))
		}
	}
}

// TestSushyStyleSessionAuth replays sushy's automatic authentication against two replicas:
// unauthenticated service root, POST to Links.Sessions, token reuse, re-login and one retry
// after a 401 (the session expired or was ended elsewhere), DELETE of the session at the end.
func TestSushyStyleSessionAuth(t *testing.T) {
	s := stack.Start(t, stack.Options{Config: secConfig(t, nil)})
	replicas := []string{s.URL, s.AddServer(t)}
	n := 0
	next := func() string { n++; return replicas[n%2] } // a load balancer alternating replicas

	root := send(t, next(), http.MethodGet, "/redfish/v1/", auth{}, "")
	require.Equal(t, 200, root.code)
	sessionsURI := root.doc["Links"].(map[string]any)["Sessions"].(map[string]any)["@odata.id"].(string)
	logins := 0
	var tok, loc string
	login := func() {
		logins++
		r := send(t, next(), http.MethodPost, sessionsURI, auth{}, `{"UserName":"alice","Password":"`+secPassword("alice")+`"}`)
		require.Equal(t, 201, r.code, "%s", r.body)
		tok, loc = r.hdr.Get("X-Auth-Token"), r.hdr.Get("Location")
	}
	get := func(path string) resp {
		r := send(t, next(), http.MethodGet, path, tokenAuth(tok), "")
		if r.code == http.StatusUnauthorized {
			login()
			r = send(t, next(), http.MethodGet, path, tokenAuth(tok), "")
		}
		return r
	}
	login()
	for i := 0; i < 6; i++ {
		require.Equal(t, 200, get("/redfish/v1/Systems/tenant-a.cp-0").code)
	}
	assert.Equal(t, 1, logins, "the token is reused on every replica")
	code := send(t, next(), http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", tokenAuth(tok), `{"ResetType":"ForceOff"}`).code
	assert.Equal(t, 204, code, "writes with the token")

	// The session ends behind sushy's back, as an expiry sweep on another replica does.
	id := loc[strings.LastIndex(loc, "/")+1:]
	require.NoError(t, s.Dyn.Resource(sessions.SecretResource).Namespace(stack.Namespace).Delete(context.Background(), sessions.NamePrefix+id, metav1.DeleteOptions{}))
	eventually(t, "both replicas forget the session", func() bool {
		return send(t, replicas[0], http.MethodGet, "/redfish/v1", tokenAuth(tok), "").code == 200 &&
			send(t, replicas[0], http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401 &&
			send(t, replicas[1], http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401
	})
	require.Equal(t, 200, get("/redfish/v1/Systems/tenant-a.cp-0").code)
	assert.Equal(t, 2, logins, "one 401, one new login, one retry")
	require.Equal(t, 200, get("/redfish/v1/Managers/tenant-a.cp-0").code)
	assert.Equal(t, 2, logins)

	// Done: DELETE the session.
	require.Equal(t, 204, send(t, next(), http.MethodDelete, loc, tokenAuth(tok), "").code)
	eventually(t, "the token is dead everywhere", func() bool {
		return send(t, replicas[0], http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401 &&
			send(t, replicas[1], http.MethodGet, "/redfish/v1/Systems", tokenAuth(tok), "").code == 401
	})
}

// secretVolume writes a password file the way kubelet updates a Secret volume: through an
// atomic swap of the ..data symlink.
type secretVolume struct {
	t   *testing.T
	dir string
	gen int
}

func (v *secretVolume) write(files map[string]string) {
	v.gen++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.gen, v.gen)
	require.NoError(v.t, os.Mkdir(filepath.Join(v.dir, ts), 0o755))
	for k, val := range files {
		require.NoError(v.t, os.WriteFile(filepath.Join(v.dir, ts, k), []byte(val), 0o400))
		if _, err := os.Lstat(filepath.Join(v.dir, k)); err != nil {
			require.NoError(v.t, os.Symlink(filepath.Join("..data", k), filepath.Join(v.dir, k)))
		}
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	require.NoError(v.t, os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")))
	require.NoError(v.t, os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")))
	if old != "" {
		require.NoError(v.t, os.RemoveAll(filepath.Join(v.dir, old)))
	}
}

// TestCredentialRotationWithoutRestart rotates a password in a Secret volume file and one in
// a Secret the servers watch. Both replicas apply the new passwords without a restart; the old
// ones, and the sessions opened with them, stop working.
func TestCredentialRotationWithoutRestart(t *testing.T) {
	vol := &secretVolume{t: t, dir: t.TempDir()}
	vol.write(map[string]string{"carol": "carol-old\n"})
	cfg := secConfig(t, func(f *config.File) {
		f.ReloadInterval = "200ms"
		f.Users = append(f.Users,
			config.UserFile{Username: "carol", Role: config.RoleOperator, PasswordFile: filepath.Join(vol.dir, "carol"), Allow: []string{"tenant-a"}},
			config.UserFile{Username: "dave", Role: config.RoleOperator, PasswordSecret: &config.SecretKeyRef{Name: "redfish-passwords", Key: "dave"}, Allow: []string{"tenant-b"}},
		)
	})
	s := stack.Start(t, stack.Options{Config: cfg})
	b := s.AddReplica(t)
	replicas := []string{s.URL, b.URL}
	status := func(base string, a auth) int {
		return send(t, base, http.MethodGet, "/redfish/v1/Systems", a, "").code
	}
	everywhere := func(what string, a auth, want int) {
		t.Helper()
		eventually(t, what, func() bool { return status(replicas[0], a) == want && status(replicas[1], a) == want })
	}

	// dave's Secret does not exist yet: dave cannot log in.
	everywhere("no dave yet", auth{user: "dave", pass: "dave-1"}, 401)
	secrets := s.Dyn.Resource(sessions.SecretResource).Namespace(stack.Namespace)
	sec := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "redfish-passwords", "namespace": stack.Namespace},
		"stringData": map[string]any{"dave": "dave-1"}}}
	_, err := secrets.Create(context.Background(), sec, metav1.CreateOptions{})
	require.NoError(t, err)
	everywhere("dave from the Secret", auth{user: "dave", pass: "dave-1"}, 200)

	// Sessions opened with the old passwords.
	carolTok, _ := loginAt(t, replicas[0], "carol", "carol-old")
	daveTok, _ := loginAt(t, replicas[1], "dave", "dave-1")
	everywhere("carol's session", tokenAuth(carolTok), 200)
	everywhere("dave's session", tokenAuth(daveTok), 200)

	// Rotate the file (a Secret volume update) and the Secret.
	vol.write(map[string]string{"carol": "carol-new\n"})
	sec.Object["stringData"] = map[string]any{"dave": "dave-2"}
	_, err = secrets.Update(context.Background(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)

	everywhere("carol's new password", auth{user: "carol", pass: "carol-new"}, 200)
	everywhere("carol's old password refused", auth{user: "carol", pass: "carol-old"}, 401)
	everywhere("carol's old session ended", tokenAuth(carolTok), 401)
	everywhere("dave's new password", auth{user: "dave", pass: "dave-2"}, 200)
	everywhere("dave's old password refused", auth{user: "dave", pass: "dave-1"}, 401)
	everywhere("dave's old session ended", tokenAuth(daveTok), 401)
	carolTok, _ = loginAt(t, replicas[1], "carol", "carol-new")
	everywhere("a session with the new password", tokenAuth(carolTok), 200)

	// Other users never noticed.
	everywhere("alice unaffected", basicAs("alice"), 200)

	// The key disappears from the Secret: dave is disabled.
	sec.Object["stringData"] = nil
	sec.Object["data"] = map[string]any{}
	_, err = secrets.Update(context.Background(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	everywhere("dave disabled", auth{user: "dave", pass: "dave-2"}, 401)
	acct := send(t, replicas[0], http.MethodGet, "/redfish/v1/AccountService/Accounts/dave", basicAs("admin"), "")
	assert.Equal(t, false, acct.doc["Enabled"])
}

// TestLockoutIsolation: a brute force and a password spray from one client address, seen
// through a trusted proxy's X-Forwarded-For, lock that address and that user there, and
// nobody else: not other tenants, not other addresses, not sessions, not users who keep
// working from the same address.
func TestLockoutIsolation(t *testing.T) {
	cfg := secConfig(t, func(f *config.File) {
		f.TrustedProxies = []string{"127.0.0.1/32", "::1/128"}
		f.Lockout = config.LockoutFile{Threshold: 4, PeerThreshold: 8, Window: "5m", Duration: "5m"}
	})
	s := stack.Start(t, stack.Options{Config: cfg})
	base := s.URL
	const attacker, shared, other = "203.0.113.50", "198.51.100.7", "192.0.2.99"
	from := func(a auth, addr string) auth { a.xff = addr; return a }
	systems := func(a auth) int { return send(t, base, http.MethodGet, "/redfish/v1/Systems", a, "").code }

	// Tenant-b's installer works from the shared address (a NAT) and holds a session.
	require.Equal(t, 200, systems(from(basicAs("bob"), shared)))
	bobTok, _ := loginAt(t, base, "bob", secPassword("bob"))

	// Brute force on alice from the attacker.
	for i := 0; i < 4; i++ {
		require.Equal(t, 401, systems(from(auth{user: "alice", pass: fmt.Sprint("guess-", i)}, attacker)))
	}
	assert.Equal(t, 401, systems(from(basicAs("alice"), attacker)), "alice is locked out from the attacker's address")
	r := send(t, base, http.MethodPost, "/redfish/v1/SessionService/Sessions", from(auth{}, attacker), `{"UserName":"alice","Password":"`+secPassword("alice")+`"}`)
	assert.Equal(t, 401, r.code)
	assert.Equal(t, 200, systems(from(basicAs("alice"), other)), "alice elsewhere is fine")
	assert.Equal(t, 200, systems(from(basicAs("reader"), attacker)), "other users from the attacker's address are fine")

	// Password spray from the shared address.
	for i := 0; i < 8; i++ {
		systems(from(auth{user: fmt.Sprintf("user%02d", i), pass: "Spring2026"}, shared))
	}
	assert.Equal(t, 200, systems(from(basicAs("bob"), shared)), "bob verified recently: still works from the shared address")
	assert.Equal(t, 200, systems(from(tokenAuth(bobTok), shared)), "sessions are never locked")
	tok, _ := func() (string, string) {
		r := send(t, base, http.MethodPost, "/redfish/v1/SessionService/Sessions", from(auth{}, shared), `{"UserName":"bob","Password":"`+secPassword("bob")+`"}`)
		require.Equal(t, 201, r.code, "bob can even log in again from it")
		return r.hdr.Get("X-Auth-Token"), ""
	}()
	assert.Equal(t, 200, systems(tokenAuth(tok)))
	assert.Equal(t, 401, systems(from(basicAs("reader-b"), shared)), "a credential not verified recently is refused from the sprayed address")
	assert.Equal(t, 200, systems(from(basicAs("reader-b"), other)), "and works from anywhere else")

	// An untrusted peer cannot pick its address: X-Forwarded-For from it is ignored. (The
	// test's own address is the proxy here, so that is covered by the unit tests.)
	admin := send(t, base, http.MethodGet, "/redfish/v1/AccountService/Accounts/alice", basicAs("admin"), "")
	assert.Equal(t, true, admin.doc["Locked"])
	assert.Equal(t, false, send(t, base, http.MethodGet, "/redfish/v1/AccountService/Accounts/bob", basicAs("admin"), "").doc["Locked"])
}

// TestAuditAgainstAPIServer: a real power action over a session leaves an audit line with
// user, session, system, parameters, status and request id, and no secret.
func TestAuditAgainstAPIServer(t *testing.T) {
	s := stack.Start(t, stack.Options{Config: secConfig(t, nil)})
	tok, _ := loginAt(t, s.URL, "alice", secPassword("alice"))
	r := send(t, s.URL, http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-1/Actions/ComputerSystem.Reset", tokenAuth(tok), `{"ResetType":"On"}`)
	require.Equal(t, 204, r.code)
	var line map[string]any
	eventually(t, "the audit line", func() bool {
		for _, e := range s.First.Logs.FilterMessage("audit").All() {
			if m := e.ContextMap(); m["action"] == "ComputerSystem.Reset" {
				line = m
				return true
			}
		}
		return false
	})
	assert.Equal(t, "alice", line["user"])
	assert.Equal(t, "session", line["auth"])
	assert.Equal(t, "tenant-a.cp-1", line["system"])
	assert.Equal(t, int64(204), line["status"])
	assert.Equal(t, map[string]any{"ResetType": "On"}, line["params"])
	assert.NotEmpty(t, line["request_id"])
	assert.NotEmpty(t, line["session"])
	for _, e := range s.First.Logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		assert.NotContains(t, string(b), tok)
		assert.NotContains(t, string(b), secPassword("alice"))
	}
	assert.Equal(t, "Once", runStrategy(apiVM(t, s, "tenant-a", "cp-1")))
}
