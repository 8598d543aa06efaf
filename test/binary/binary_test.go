package binary

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readinessLag bounds how long /readyz takes to notice the apiserver going away or coming back:
// reachability checks are rate-limited to one per 5 s (pkg/server pingInterval) and time out
// after 3 s; the rest is margin for a loaded 2-core CI machine.
const readinessLag = 15 * time.Second

// One binary through its life: start and readiness, Redfish traffic, /metrics, the JSON logs,
// the leader Lease, an apiserver outage seen by /readyz, and SIGTERM with a request in flight.
func TestBinary(t *testing.T) {
	c := startCluster(t)
	s := c.startServer(t, serverOpts{name: "a"})

	// ---- start: the server listens once its caches synced, so /healthz and /readyz come up
	// together.
	toHealthy := s.waitStatus("/healthz", http.StatusOK, 2*time.Minute)
	figure(t, "start to /healthz 200", toHealthy)
	s.waitStatus("/readyz", http.StatusOK, time.Minute)
	toReady := time.Since(s.started)
	figure(t, "start to /readyz 200", toReady)
	code, body, err := s.get("/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", string(body))

	// ---- Redfish traffic that the metrics and logs below must reflect.
	code, systems := s.admin(http.MethodGet, "/redfish/v1/Systems", "")
	require.Equal(t, http.StatusOK, code)
	var ids []string
	for _, m := range systems["Members"].([]any) {
		ids = append(ids, m.(map[string]any)["@odata.id"].(string))
	}
	assert.Equal(t, []string{"/redfish/v1/Systems/tenant-a.cp-0", "/redfish/v1/Systems/tenant-a.cp-1", "/redfish/v1/Systems/tenant-a.cp-2"},
		ids, "only the allowlisted namespace is exposed")
	for _, id := range []string{"tenant-a.cp-0", "tenant-a.cp-1"} {
		code, _ = s.admin(http.MethodGet, "/redfish/v1/Systems/"+id, "")
		assert.Equal(t, http.StatusOK, code, id)
	}
	code, _ = s.admin(http.MethodGet, "/redfish/v1/Systems/tenant-b.cp-0", "")
	assert.Equal(t, http.StatusNotFound, code, "tenant-b is not allowlisted")

	code, _ = s.admin(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	require.Equal(t, http.StatusNoContent, code)
	s.waitPower("tenant-a.cp-0", "On", 30*time.Second)

	code, hdr, _ := s.do(http.MethodGet, "/redfish/v1/Systems", adminUser, "wrong-password", "")
	assert.Equal(t, http.StatusUnauthorized, code, "bad Basic credentials")
	assert.NotEmpty(t, hdr.Get("WWW-Authenticate"))
	code, _, _ = s.do(http.MethodPost, "/redfish/v1/SessionService/Sessions", "", "",
		`{"UserName":"admin","Password":"wrong-password"}`)
	assert.Equal(t, http.StatusUnauthorized, code, "bad session login")
	code, _, _ = s.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-1/Actions/ComputerSystem.Reset", "reader", password, `{"ResetType":"On"}`)
	assert.Equal(t, http.StatusForbidden, code, "a ReadOnly user may not reset")
	// A session that stays open, for the active-sessions gauge.
	code, loginHdr, _ := s.do(http.MethodPost, "/redfish/v1/SessionService/Sessions", "", "",
		`{"UserName":"admin","Password":"`+password+`"}`)
	require.Equal(t, http.StatusCreated, code)
	require.NotEmpty(t, loginHdr.Get("X-Auth-Token"))

	// ---- /metrics
	t.Run("metrics", func(t *testing.T) {
		text := s.metrics()
		all := parseMetrics(t, text)
		for _, want := range []struct {
			name   string
			labels map[string]string
		}{
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/redfish/v1/Systems/{id}", "method": "GET", "code": "200"}},
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/redfish/v1/Systems/{id}", "method": "GET", "code": "404"}},
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset", "method": "POST", "code": "204"}},
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset", "method": "POST", "code": "403"}},
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/redfish/v1/Systems", "method": "GET", "code": "401"}},
			{"kubevirt_redfish_http_requests_total", map[string]string{"route": "/readyz", "method": "GET", "code": "200"}},
			{"kubevirt_redfish_http_request_duration_seconds_count", map[string]string{"route": "/redfish/v1/Systems/{id}", "method": "GET"}},
			{"kubevirt_redfish_http_request_duration_seconds_bucket", map[string]string{"route": "/redfish/v1/Systems/{id}", "method": "GET", "le": "+Inf"}},
			{"kubevirt_redfish_actions_total", map[string]string{"action": "Reset.On", "result": "success"}},
			{"kubevirt_redfish_informers_synced", map[string]string{}},
			{"kubevirt_redfish_media_imports_in_progress", map[string]string{}},
			{"kubevirt_redfish_system_info", map[string]string{"system": "tenant-a.cp-0", "namespace": "tenant-a", "node": "node-1", "power_state": "On", "health": "OK"}},
			{"process_cpu_seconds_total", map[string]string{}},
			{"process_resident_memory_bytes", map[string]string{}},
			{"process_open_fds", map[string]string{}},
			{"go_goroutines", map[string]string{}},
			{"go_memstats_heap_inuse_bytes", map[string]string{}},
		} {
			assert.NotEmpty(t, find(all, want.name, want.labels), "no sample %s%v", want.name, want.labels)
		}
		assert.Equal(t, "1", find(all, "kubevirt_redfish_actions_total", map[string]string{"action": "Reset.On", "result": "success"}))
		assert.Equal(t, "1", find(all, "kubevirt_redfish_informers_synced", map[string]string{}))
		// The 403 of a ReadOnly user never reached the cluster: it is not an action.
		assert.Empty(t, find(all, "kubevirt_redfish_actions_total", map[string]string{"action": "Reset.On", "result": "client_error"}))

		// Bounded cardinality: route labels are templates, and only the per-system info
		// series names systems.
		systemInfo := 0
		for _, sr := range all {
			if sr.name == "kubevirt_redfish_system_info" {
				systemInfo++
				continue
			}
			for k, v := range sr.labels {
				assert.NotContains(t, v, "tenant-a.cp-", "%s label %s=%q names a system", sr.name, k, v)
				assert.NotContains(t, v, "tenant-b", "%s label %s=%q names a namespace", sr.name, k, v)
			}
			if r, ok := sr.labels["route"]; ok {
				assert.True(t, r == "unmatched" || strings.HasPrefix(r, "/"), "route label %q", r)
			}
		}
		assert.Equal(t, 3, systemInfo, "one kubevirt_redfish_system_info series per exposed system")
	})

	// Active sessions and authentication failures are deliverables of the metrics (pkg/metrics
	// registers them; pkg/server must feed them): the bad Basic credential and the bad login
	// above count, by method, and the open session shows.
	t.Run("auth metrics", func(t *testing.T) {
		all := parseMetrics(t, s.metrics())
		for _, method := range []string{"basic", "login"} {
			v, _ := strconv.ParseFloat(find(all, "kubevirt_redfish_auth_failures_total", map[string]string{"method": method}), 64)
			assert.GreaterOrEqual(t, v, 1.0, "kubevirt_redfish_auth_failures_total{method=%q} after a bad attempt", method)
		}
		assert.Equal(t, "1", find(all, "kubevirt_redfish_sessions_active", map[string]string{}), "kubevirt_redfish_sessions_active with one session open")
	})

	// ---- logs: JSON, the access line at debug level with request id and user, an audit line
	// for every POST, and never the password.
	t.Run("logs", func(t *testing.T) {
		lines, notJSON := s.logs()
		assert.Empty(t, notJSON, "every log line is JSON")
		require.NotEmpty(t, lines)
		for _, l := range lines {
			assert.NotEmpty(t, l.str("level"), "log line without level: %v", l)
			assert.NotEmpty(t, l.str("msg"), "log line without msg: %v", l)
			assert.Contains(t, l, "ts")
		}
		serving := s.logsWith("serving Redfish")
		require.Len(t, serving, 1)
		assert.Equal(t, version, serving[0].str("version"), "the ldflags version")
		assert.Equal(t, "http://"+s.addr+"/redfish/v1", serving[0].str("url"))

		requests := map[string]logLine{} // by request id
		sawUser := false
		for _, l := range s.logsWith("request") {
			assert.Equal(t, "debug", l.str("level"))
			require.NotEmpty(t, l.str("request_id"), "access line without request id: %v", l)
			requests[l.str("request_id")] = l
			if l.str("route") == "/redfish/v1/Systems/{id}" && l.str("user") == adminUser {
				sawUser = true
			}
		}
		assert.True(t, sawUser, "an access line for GET /redfish/v1/Systems/{id} names the user")

		var reset logLine
		for _, l := range s.logsWith("audit") {
			if l.str("action") == "ComputerSystem.Reset" && l.str("user") == adminUser {
				reset = l
			}
		}
		require.NotNil(t, reset, "an audit line for the Reset POST")
		assert.Equal(t, "info", reset.str("level"))
		assert.Equal(t, "tenant-a.cp-0", reset.str("system"))
		assert.Equal(t, "basic", reset.str("auth"))
		assert.Equal(t, "success", reset.str("result"))
		assert.EqualValues(t, http.StatusNoContent, reset["status"])
		assert.Equal(t, map[string]any{"ResetType": "On"}, reset["params"])
		assert.Equal(t, "127.0.0.1", reset.str("source"))
		access, ok := requests[reset.str("request_id")]
		if assert.True(t, ok, "the audit line's request id %q matches an access line", reset.str("request_id")) {
			assert.Equal(t, adminUser, access.str("user"))
			assert.EqualValues(t, http.StatusNoContent, access["status"])
		}
		// The failed login leaves an audit line too, naming the attempted user.
		failedLogin := false
		for _, l := range s.logsWith("audit") {
			if l.str("action") == "Session.Login" && l.str("result") == "failure" && l.str("login_user") == adminUser {
				failedLogin = true
			}
		}
		assert.True(t, failedLogin, "an audit line for the failed login")

		rawBytes, err := os.ReadFile(s.Log)
		require.NoError(t, err)
		raw := string(rawBytes)
		assert.NotContains(t, raw, password, "the password never reaches the log")
		assert.NotContains(t, raw, loginHdr.Get("X-Auth-Token"), "the session token never reaches the log")
	})

	// ---- the leader Lease, in the server's namespace.
	t.Run("lease", func(t *testing.T) {
		eventually(t, 30*time.Second, "the Lease to be held", func() bool {
			l := c.lease(t)
			return l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
		})
		l := c.lease(t)
		leading := s.logsWith("leading: running background loops")
		require.Len(t, leading, 1, "the only replica leads")
		assert.Equal(t, leading[0].str("identity"), *l.Spec.HolderIdentity)
		assert.EqualValues(t, 15, *l.Spec.LeaseDurationSeconds)
	})

	// ---- readiness follows the apiserver; liveness and cached reads do not.
	t.Run("apiserver outage", func(t *testing.T) {
		// A fresh successful ping, so the measurement below starts from a known state.
		s.waitStatus("/readyz", http.StatusOK, readinessLag)
		stopping := time.Now()
		require.NoError(t, c.Env.StopAPIServer())
		stopped := time.Now()
		figure(t, "kube-apiserver stop (SIGTERM to exit)", stopped.Sub(stopping))
		// Depending on where the 5 s ping interval stands, this is anywhere from at once to 5 s.
		toNotReady := s.waitStatus("/readyz", http.StatusServiceUnavailable, readinessLag)
		figure(t, "apiserver gone to /readyz 503", toNotReady)
		assert.Less(t, toNotReady, readinessLag)
		code, body, err := s.get("/readyz")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Contains(t, string(body), "apiserver unreachable")

		code, _, err = s.get("/healthz")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, "liveness does not depend on the apiserver: kubelet must not restart the pod")
		assert.Equal(t, "On", s.powerState("tenant-a.cp-0"), "reads keep answering from the caches")

		begin := time.Now()
		code, hdr, _ := s.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-1/Actions/ComputerSystem.Reset", adminUser, password, `{"ResetType":"On"}`)
		assert.Equal(t, http.StatusServiceUnavailable, code, "an action needs the apiserver")
		assert.Equal(t, "5", hdr.Get("Retry-After"))
		assert.Less(t, time.Since(begin), 10*time.Second, "the action fails fast")

		require.NoError(t, c.Env.StartAPIServer())
		figure(t, "apiserver down for", time.Since(stopped))
		toReadyAgain := s.waitStatus("/readyz", http.StatusOK, readinessLag)
		figure(t, "apiserver ready to /readyz 200", toReadyAgain)

		all := parseMetrics(t, s.metrics())
		assert.NotEmpty(t, find(all, "kubevirt_redfish_apiserver_errors_total", map[string]string{"operation": "patch_vm"}),
			"the failed patch is counted")
		assert.NotEmpty(t, find(all, "kubevirt_redfish_actions_total", map[string]string{"action": "Reset.On", "result": "server_error"}))
		code, _ = s.admin(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-1/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
		assert.Equal(t, http.StatusNoContent, code, "actions work again without a restart")
	})

	// ---- SIGTERM: the listener closes, idle keep-alive connections close, the request in
	// flight finishes, the Lease is released, and the process exits 0 within the grace.
	t.Run("SIGTERM", func(t *testing.T) {
		// An idle keep-alive connection.
		idle := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		resp, err := idle.Get(s.url("/redfish/v1/"))
		require.NoError(t, err)
		resp.Body.Close()

		slow := s.startSlowRequest(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-2/Actions/ComputerSystem.Reset",
			adminUser, password, `{"ResetType":"On"}`)
		require.NoError(t, s.Cmd.Process.Signal(syscall.SIGTERM))
		signalled := time.Now()

		// New connections are refused once the listener closed.
		refused := eventually(t, 5*time.Second, "the listener to close", func() bool {
			_, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(s.url("/healthz"))
			return err != nil
		})
		figure(t, "SIGTERM to listener closed", refused)
		time.Sleep(time.Second)
		assert.False(t, s.Exited(), "the process waits for the request in flight")

		finishing := time.Now()
		resp, body, err := slow.finish()
		require.NoError(t, err, "the request in flight gets its answer")
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", body)
		figure(t, "in-flight Reset: rest of the body sent to answer", time.Since(finishing))
		figure(t, "SIGTERM to in-flight request answered", time.Since(signalled))
		// The caches stay live while the server drains: the Reset sees its own write at once,
		// rather than waiting out the 3 s cache wait of a stopped informer.
		assert.Less(t, time.Since(finishing), 2*time.Second, "the request in flight is served with live caches")

		exit, err := s.waitExit(shutdownGrace + 5*time.Second)
		require.NoError(t, err)
		took := s.ExitedAt().Sub(signalled)
		figure(t, "SIGTERM to exit (with a request in flight until ~1 s)", took)
		assert.Equal(t, 0, exit, "exit code")
		assert.Less(t, took, shutdownGrace, "the process exits within the shutdown grace")
		assert.Len(t, s.logsWith("shutting down"), 1)

		// ReleaseOnCancel: the next leader need not wait for the Lease to expire.
		l := c.lease(t)
		require.NotNil(t, l)
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		assert.Empty(t, holder, "the Lease is released at shutdown")

		// The process state after the exit: the log is JSON to the end.
		_, notJSON := s.logs()
		assert.Empty(t, notJSON, "every log line is JSON")
	})
}

// An idle server exits on SIGTERM at once.
func TestBinaryIdleSIGTERM(t *testing.T) {
	c := startCluster(t)
	s := c.startServer(t, serverOpts{name: "idle"})
	s.waitStatus("/readyz", http.StatusOK, 2*time.Minute)
	figure(t, "start to /readyz 200", time.Since(s.started))
	// An idle keep-alive connection must not hold the shutdown up.
	resp, err := s.hc.Get(s.url("/redfish/v1/"))
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGTERM))
	signalled := time.Now()
	exit, err := s.waitExit(shutdownGrace + 5*time.Second)
	require.NoError(t, err)
	figure(t, "idle SIGTERM to exit", s.ExitedAt().Sub(signalled))
	assert.Equal(t, 0, exit)
	assert.Less(t, s.ExitedAt().Sub(signalled), 5*time.Second)
}
