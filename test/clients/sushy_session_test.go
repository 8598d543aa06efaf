package clients

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// sessionSteps are the steps of sushy_ironic.py --flow session, in order.
var sessionSteps = []string{
	"session_connect", "get_system", "managers", "token_reused",
	"session_ended_by_server", "relogin_after_401", "new_token_reused",
	"close", "session_logged_out",
}

const sessionsPath = "/redfish/v1/SessionService/Sessions"

// sessionIdleTimeout is the idle timeout of the expiry case: the configuration's minimum.
const sessionIdleTimeout = 30 * time.Second

// TestSushySessionAuth drives sushy's default ("auto") authentication against the server's
// SessionService through the real sushy (sushy_ironic.py --flow session): one login, the
// token reused on every request, and, once the session has ended on the server side, a 401,
// one new login and one retry of the failed request with the new token; closing sushy
// deletes its session. The session is ended three ways: a logout through the API by the same
// user (with Basic credentials), the deletion of its Secret through the apiserver (as another
// replica's logout or expiry sweep does), and an idle expiry.
//
// Sessions live in the cluster, so this test always runs over the real kube-apiserver,
// whatever $KRF_CLIENTS_BACKEND says.
func TestSushySessionAuth(t *testing.T) {
	t.Parallel()
	version := requireSushy(t)
	t.Logf("sushy %s (%s)", version, python())

	cases := []struct {
		name string
		// idle is the configured session timeout (0: the default, 30 minutes).
		idle time.Duration
		end  func(*sessionEnder, *testing.T, string) (map[string]any, error)
	}{
		{name: "logout through the API", end: (*sessionEnder).logout},
		{name: "session secret deleted", end: (*sessionEnder).deleteSecret},
		{name: "idle timeout", idle: sessionIdleTimeout, end: (*sessionEnder).waitIdleExpiry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := stack.Config(t)
			if tc.idle > 0 {
				cfg.Sessions.Timeout = tc.idle
			}
			s := stack.Start(t, stack.Options{Sim: sim.Options{BootDelay: bootDelay, ShutdownDelay: shutdownDelay}, Config: cfg})
			st := newStack(s.URL)
			e := &sessionEnder{stack: s, st: st, idle: cfg.Sessions.Timeout}

			// The script POSTs here when the session should end; the answer (200 once the
			// session is dead for the server, 500 with the reason otherwise) releases it.
			var mu sync.Mutex
			var calls []sessionCallback
			cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var c sessionCallback
				if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
					http.Error(w, "bad callback body: "+err.Error(), http.StatusBadRequest)
					return
				}
				mu.Lock()
				calls = append(calls, c)
				n := len(calls)
				mu.Unlock()
				if n > 1 {
					http.Error(w, "the session was already ended once", http.StatusConflict)
					return
				}
				started := time.Now()
				detail, err := e.end(t, tc.end, c)
				if err != nil {
					t.Errorf("ending the session: %v", err)
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				detail["took_s"] = time.Since(started).Round(time.Millisecond).Seconds()
				t.Logf("session %s ended: %v", c.Session, detail)
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(detail)
			}))
			t.Cleanup(cb.Close)

			logPath := filepath.Join(t.TempDir(), "exchanges.jsonl")
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(logPath)
					t.Logf("sushy's HTTP exchanges:\n%s", b)
				}
			})
			system := "/redfish/v1/Systems/tenant-a.cp-0"
			runSushy(t, st, sushyRun{user: stack.Admin, system: system, steps: sessionSteps,
				args: []string{"--flow", "session", "--session-callback", cb.URL + "/end-session",
					"--exchange-log", logPath}})

			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 1 {
				t.Fatalf("the script called back %d times, want once", len(calls))
			}
			checkSessionExchanges(t, readSessionExchanges(t, logPath), system, e)

			// Nothing is left: the user's session list is empty, and so is the namespace.
			if n := e.listSessions(t); len(n) != 0 {
				t.Errorf("sessions left after sushy closed: %v", n)
			}
			sessionWaitFor(t, 3*time.Second+cfg.Sessions.Timeout/5, "every session Secret is gone", func() (bool, string) {
				left := e.sessionSecrets(t)
				return len(left) == 0, fmt.Sprint(left)
			})
		})
	}
}

// sessionCallback is what the script POSTs when the session should end.
type sessionCallback struct {
	Session string `json:"session"` // the session's URI (the login's Location)
	Token   string `json:"token"`   // the first 16 hex digits of the token's SHA-256
	User    string `json:"user"`
}

// sessionEnder ends sushy's session on the server side and records what it saw.
type sessionEnder struct {
	stack *stack.Stack
	st    *Stack
	idle  time.Duration

	// killedID is the id of the session it ended; tokenLabel the token label of its Secret.
	killedID, tokenLabel string
}

// end checks that the script's session is the user's only one, that its Secret carries the
// token the script logged in with, then ends it with how.
func (e *sessionEnder) end(t *testing.T, how func(*sessionEnder, *testing.T, string) (map[string]any, error), c sessionCallback) (map[string]any, error) {
	id := strings.TrimPrefix(c.Session, sessionsPath+"/")
	if id == c.Session || id == "" || strings.Contains(id, "/") {
		return nil, fmt.Errorf("the script reports the session %q, not a member of %s", c.Session, sessionsPath)
	}
	if got := e.listSessions(t); len(got) != 1 || got[0] != c.Session {
		return nil, fmt.Errorf("GET %s as %s lists %v, want only the script's session %s", sessionsPath, c.User, got, c.Session)
	}
	secrets := e.sessionSecrets(t)
	if len(secrets) != 1 || secrets[0].name != sessions.NamePrefix+id {
		return nil, fmt.Errorf("session Secrets %v, want only %s%s", secrets, sessions.NamePrefix, id)
	}
	if len(c.Token) < 16 || !strings.HasPrefix(secrets[0].tokenLabel, c.Token) {
		return nil, fmt.Errorf("the Secret's token label %q does not start with the hash of sushy's token %q", secrets[0].tokenLabel, c.Token)
	}
	e.killedID, e.tokenLabel = id, secrets[0].tokenLabel
	detail, err := how(e, t, id)
	if err != nil {
		return nil, err
	}
	if got := e.listSessions(t); len(got) != 0 {
		return nil, fmt.Errorf("after ending the session GET %s still lists %v", sessionsPath, got)
	}
	return detail, nil
}

// logout DELETEs the session through the API as the same user, with Basic credentials.
func (e *sessionEnder) logout(t *testing.T, id string) (map[string]any, error) {
	code, body := e.basic(t, http.MethodDelete, sessionsPath+"/"+id)
	if code != http.StatusNoContent && code != http.StatusOK {
		return nil, fmt.Errorf("DELETE %s/%s with Basic auth answered %d: %s", sessionsPath, id, code, body)
	}
	return map[string]any{"how": "DELETE by " + e.st.User + " with Basic auth", "status": code}, nil
}

// deleteSecret deletes the session's Secret through the apiserver, and waits until the
// server no longer lists the session.
func (e *sessionEnder) deleteSecret(t *testing.T, id string) (map[string]any, error) {
	err := e.stack.Dyn.Resource(sessions.SecretResource).Namespace(stack.Namespace).
		Delete(context.Background(), sessions.NamePrefix+id, metav1.DeleteOptions{})
	if err != nil {
		return nil, fmt.Errorf("deleting the session Secret: %w", err)
	}
	started := time.Now()
	for len(e.listSessions(t)) > 0 {
		if time.Since(started) > 10*time.Second {
			return nil, fmt.Errorf("the server still lists the session 10s after its Secret was deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return map[string]any{"how": "Secret " + sessions.NamePrefix + id + " deleted through the apiserver",
		"forgotten_after_s": time.Since(started).Round(time.Millisecond).Seconds()}, nil
}

// waitIdleExpiry lets the session expire: sushy is blocked on the callback, and listing the
// sessions with Basic credentials does not use the session.
func (e *sessionEnder) waitIdleExpiry(t *testing.T, id string) (map[string]any, error) {
	started := time.Now()
	for len(e.listSessions(t)) > 0 {
		if time.Since(started) > 2*e.idle+10*time.Second {
			return nil, fmt.Errorf("the session did not expire within %v (idle timeout %v)", time.Since(started).Round(time.Second), e.idle)
		}
		time.Sleep(250 * time.Millisecond)
	}
	waited := time.Since(started)
	// The script logged in a moment before it called back: most of the timeout is left.
	if waited < e.idle/2 {
		return nil, fmt.Errorf("the session ended %v after the callback, long before its idle timeout %v", waited.Round(time.Millisecond), e.idle)
	}
	return map[string]any{"how": fmt.Sprintf("idle for the timeout (%v)", e.idle),
		"expired_after_s": waited.Round(time.Millisecond).Seconds()}, nil
}

// basic sends a request as the stack's administrator with Basic credentials.
func (e *sessionEnder) basic(t *testing.T, method, path string) (int, []byte) {
	req, err := http.NewRequest(method, e.st.BaseURL+path, nil)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	req.SetBasicAuth(e.st.User, e.st.Password)
	req.Header.Set("OData-Version", "4.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// listSessions is the administrator's session list (GET Sessions with Basic credentials).
func (e *sessionEnder) listSessions(t *testing.T) []string {
	code, body := e.basic(t, http.MethodGet, sessionsPath)
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		} `json:"Members"`
		Count *int `json:"Members@odata.count"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &coll) != nil || coll.Count == nil || *coll.Count != len(coll.Members) {
		t.Errorf("GET %s answered %d: %s", sessionsPath, code, body)
		return []string{"?"}
	}
	out := []string{}
	for _, m := range coll.Members {
		out = append(out, m.ID)
	}
	return out
}

type sessionSecret struct{ name, tokenLabel string }

func (s sessionSecret) String() string { return s.name }

// sessionSecrets lists the session Secrets in the servers' namespace.
func (e *sessionEnder) sessionSecrets(t *testing.T) []sessionSecret {
	list, err := e.stack.Dyn.Resource(sessions.SecretResource).Namespace(stack.Namespace).
		List(context.Background(), metav1.ListOptions{LabelSelector: sessions.LabelSession + "=true"})
	if err != nil {
		t.Errorf("listing session Secrets: %v", err)
		return []sessionSecret{{name: "?"}}
	}
	out := []sessionSecret{}
	for _, it := range list.Items {
		out = append(out, sessionSecret{name: it.GetName(), tokenLabel: it.GetLabels()[sessions.LabelToken]})
	}
	return out
}

// sessionExchange is one line of the script's --exchange-log: an HTTP exchange of sushy's, or
// the mark of the moment the session was ended (Event).
type sessionExchange struct {
	Event string `json:"event"`

	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	// XAuthToken identifies the token the request carried (a SHA-256 prefix); Authorization is
	// the scheme of the request's Authorization header.
	XAuthToken    string `json:"x_auth_token"`
	Authorization string `json:"authorization"`
	// NewToken and Location are the response's X-Auth-Token (as a SHA-256 prefix) and Location.
	NewToken string `json:"new_token"`
	Location string `json:"location"`
}

func (x sessionExchange) String() string {
	if x.Event != "" {
		return "-- " + x.Event
	}
	s := fmt.Sprintf("%s %s %d token=%q", x.Method, x.Path, x.Status, x.XAuthToken)
	if x.Authorization != "" {
		s += " Authorization=" + x.Authorization
	}
	if x.NewToken != "" {
		s += fmt.Sprintf(" -> new token %q at %s", x.NewToken, x.Location)
	}
	return s
}

func readSessionExchanges(t *testing.T, path string) []sessionExchange {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sessionExchange
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var x sessionExchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("exchange log: %v: %s", err, sc.Bytes())
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSessionExchanges checks sushy's whole conversation, independently of the script's own
// checks: root without credentials, one login, the token on everything; after the session
// ended, GET 401, one login, the same GET 200 with the new token; the new token on
// everything; DELETE of the new session at the end.
func checkSessionExchanges(t *testing.T, log []sessionExchange, system string, e *sessionEnder) {
	t.Helper()
	var lines []string
	for _, x := range log {
		lines = append(lines, x.String())
	}
	t.Logf("sushy's HTTP exchanges:\n  %s", strings.Join(lines, "\n  "))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nexchanges:\n  %s", fmt.Sprintf(format, args...), strings.Join(lines, "\n  "))
	}
	mark := -1
	for i, x := range log {
		if x.Event == "session_ended_by_server" {
			if mark >= 0 {
				fail("two session_ended_by_server marks")
			}
			mark = i
		}
	}
	if mark < 0 {
		fail("no session_ended_by_server mark")
	}
	before, after := log[:mark], log[mark+1:]
	isLogin := func(x sessionExchange) bool { return x.Method == http.MethodPost && x.Path == sessionsPath }
	noCreds := func(x sessionExchange) bool { return x.XAuthToken == "" && x.Authorization == "" }
	login := func(x sessionExchange, what string) {
		t.Helper()
		if !isLogin(x) || x.Status != http.StatusCreated || !noCreds(x) || x.NewToken == "" || !strings.HasPrefix(x.Location, sessionsPath+"/") {
			fail("%s: %v, want POST %s 201 without credentials headers, with X-Auth-Token and Location", what, x, sessionsPath)
		}
	}
	withToken := func(xs []sessionExchange, tok, what string) {
		t.Helper()
		for _, x := range xs {
			if x.Event != "" || x.XAuthToken != tok || x.Authorization != "" || x.Status >= 400 || isLogin(x) {
				fail("%s: %v, want only successful requests with the token %q and no Authorization header", what, x, tok)
			}
		}
	}

	// Connect: the root without credentials, one login, then the token on every request.
	if len(before) < 5 {
		fail("only %d exchanges before the session ended", len(before))
	}
	if x := before[0]; x.Method != http.MethodGet || strings.TrimSuffix(x.Path, "/") != "/redfish/v1" || x.Status != 200 || !noCreds(x) {
		fail("first exchange %v, want GET /redfish/v1/ 200 without credentials", x)
	}
	login(before[1], "login")
	tokA, locA := before[1].NewToken, before[1].Location
	withToken(before[2:], tokA, "before the session ended")
	if locA != sessionsPath+"/"+e.killedID || !strings.HasPrefix(e.tokenLabel, tokA) {
		fail("sushy's session %s (token %q) is not the one ended (%s, token label %q)", locA, tokA, e.killedID, e.tokenLabel)
	}

	// The session ended: GET 401, login, the same GET 200 with the new token.
	if len(after) < 5 {
		fail("only %d exchanges after the session ended", len(after))
	}
	if x := after[0]; x.Method != http.MethodGet || x.Path != system || x.Status != http.StatusUnauthorized || x.XAuthToken != tokA || x.Authorization != "" {
		fail("first exchange after the end %v, want GET %s 401 with the old token", x, system)
	}
	login(after[1], "re-login")
	tokB, locB := after[1].NewToken, after[1].Location
	if tokB == tokA || locB == locA {
		fail("the re-login returned the old session (%s, %q)", locB, tokB)
	}
	if x := after[2]; x.Method != http.MethodGet || x.Path != system || x.Status != 200 || x.XAuthToken != tokB || x.Authorization != "" {
		fail("retry %v, want GET %s 200 with the new token", x, system)
	}
	last := after[len(after)-1]
	withToken(after[2:len(after)-1], tokB, "after the re-login")
	if last.Method != http.MethodDelete || last.Path != locB || last.XAuthToken != tokB || last.Authorization != "" ||
		(last.Status != http.StatusNoContent && last.Status != http.StatusOK) {
		fail("last exchange %v, want DELETE %s 204 with the new token", last, locB)
	}
	logins := 0
	for _, x := range log {
		if isLogin(x) {
			logins++
		}
	}
	if logins != 2 {
		fail("%d logins, want 2", logins)
	}
}

// sessionWaitFor polls cond until it holds or timeout passes.
func sessionWaitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, timeout, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
