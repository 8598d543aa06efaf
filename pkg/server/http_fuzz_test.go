package server

// HTTP-level fuzzing: arbitrary methods, paths, queries, Content-Types, credentials and bodies
// through the real handler (server.New, every middleware, a real kubevirt.Client and session
// store) over the in-memory demo cluster of pkg/sim. A panic reaching the client, a 5xx, a
// hang, or an error that is not a Redfish envelope fails the input.
//
//	go test -run='^$' -fuzz='^FuzzHTTP$' -fuzztime=30s ./pkg/server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// fuzzTarget is the server every fuzz input goes to, built once per process: state (power,
// media, sessions) accumulates across inputs, as it does on a long-running BMC.
type fuzzTarget struct {
	handler http.Handler
	token   string // a live session of admin
}

var (
	fuzzOnce sync.Once
	fuzzSrv  *fuzzTarget
)

func fuzzServer(t testing.TB) *fuzzTarget {
	fuzzOnce.Do(func() {
		ctx := context.Background() // lives as long as the fuzzing process
		dyn, err := sim.NewDemoCluster()
		if err != nil {
			t.Fatal(err)
		}
		u, _ := sim.ToUnstructured(isoMachine())
		if _, err := dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t)
		// No request may reach outside: a fixed image size means no HEAD to the image URL, and
		// only local image hosts are allowed (without allowedNets there is no DNS lookup).
		size := resource.MustParse("1Gi")
		cfg.Media.Default.Size = &size
		cfg.Media.AllowedHosts = []string{"127.0.0.1", "localhost"}
		client := kubevirt.NewClient(dyn, cfg.Namespaces(), zap.NewNop())
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		go client.RunBackground(ctx)
		store := sessions.New(dyn, sessions.Options{Namespace: "kubevirt-redfish", MaxPerUser: 1000})
		if err := store.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s := New(cfg, client, zap.NewNop(), WithSessions(store))
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/redfish/v1/SessionService/Sessions",
			strings.NewReader(`{"UserName":"admin","Password":"`+passwords["admin"]+`"}`))
		req.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Fatalf("login: %d %s", rec.Code, rec.Body)
		}
		fuzzSrv = &fuzzTarget{handler: s, token: rec.Header().Get("X-Auth-Token")}
	})
	if fuzzSrv == nil {
		t.Fatal("the fuzz server did not start")
	}
	return fuzzSrv
}

// Credentials a fuzz input may carry.
const (
	authNone = iota
	authAdmin
	authViewer
	authAlice
	authWrong
	authSession
	authBadToken
	authKinds
)

func (ft *fuzzTarget) authorize(req *http.Request, auth uint8) {
	switch auth % authKinds {
	case authAdmin:
		req.SetBasicAuth("admin", passwords["admin"])
	case authViewer:
		req.SetBasicAuth("viewer", passwords["viewer"])
	case authAlice:
		req.SetBasicAuth("alice", passwords["alice"])
	case authWrong:
		req.SetBasicAuth("mallory", "guess") // an unknown user: locks out no one the other inputs use
	case authSession:
		req.Header.Set("X-Auth-Token", ft.token)
	case authBadToken:
		req.Header.Set("X-Auth-Token", strings.Repeat("0", 64))
	}
}

// serve sends one request through the handler, failing on a hang.
func (ft *fuzzTarget) serve(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		ft.handler.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s %s hangs", req.Method, req.URL)
	}
	if panicked != nil {
		t.Fatalf("%s %s: panic reached the client: %v", req.Method, req.URL, panicked)
	}
	return rec
}

// checkResponse applies the rules every response follows, whatever the input.
func checkResponse(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	redfishPath := strings.HasPrefix(req.URL.Path, "/redfish")
	var env redfish.Envelope
	if rec.Code >= 400 && redfishPath && req.Method != http.MethodHead {
		if err := json.Unmarshal(body, &env); err != nil || env.Error.Code == "" || len(env.Error.ExtendedInfo) == 0 {
			t.Fatalf("%s %s: %d without a Redfish error envelope: %q", req.Method, req.URL, rec.Code, body)
		}
	}
	if rec.Code >= 500 {
		// DSP0266 prescribes 501 for a query parameter starting with $ that is not supported.
		if rec.Code == http.StatusNotImplemented && strings.HasSuffix(env.Error.Code, ".QueryNotSupported") {
			return
		}
		t.Fatalf("%s %s (Content-Type %q): %d on client input: %s", req.Method, req.URL, req.Header.Get("Content-Type"), rec.Code, body)
	}
	if rec.Code == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("%s %s: 401 without WWW-Authenticate", req.Method, req.URL)
	}
	if rec.Code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
		t.Fatalf("%s %s: 405 without Allow", req.Method, req.URL)
	}
	if rec.Code < 300 && req.Method != http.MethodHead && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !json.Valid(body) {
		t.Fatalf("%s %s: %d with invalid JSON: %q", req.Method, req.URL, rec.Code, body)
	}
}

// validMethod accepts what net/http would hand a handler: an HTTP token.
func validMethod(m string) bool {
	if m == "" || len(m) > 32 {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

type httpSeed struct {
	method, target, contentType string
	auth                        uint8
	body                        string
}

// httpSeeds replays the Ironic/sushy sequence (CLIENTS.md) and the tools' common requests, then
// hostile variants.
var httpSeeds = []httpSeed{
	{"GET", "/redfish/v1/", "", authNone, ""},
	{"GET", "/redfish", "", authNone, ""},
	{"POST", "/redfish/v1/SessionService/Sessions", "application/json", authNone, `{"UserName": "admin", "Password": "admin-pw"}`},
	{"POST", "/redfish/v1/SessionService/Sessions", "application/json", authNone, `{"UserName": "admin", "Password": "wrong"}`},
	{"GET", "/redfish/v1/SessionService/Sessions", "", authSession, ""},
	{"GET", "/redfish/v1/Systems", "", authAdmin, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0", "", authSession, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0/", "", authAdmin, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0/Processors?$expand=.($levels=1)", "", authAdmin, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0?$expand=*($levels=3)", "", authAdmin, ""},
	{"GET", "/redfish/v1/Managers/tenant-a.cp-0/VirtualMedia", "", authAdmin, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0/VirtualMedia/Cd", "", authAdmin, ""},
	{"PATCH", "/redfish/v1/Systems/tenant-a.cp-0", "application/json", authAdmin, `{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`},
	{"PATCH", "/redfish/v1/Systems/tenant-a.cp-0", "application/json", authAdmin, `{"Boot": {"BootSourceOverrideMode": "UEFI"}}`},
	{"PATCH", "/redfish/v1/Systems/tenant-a.cp-0", "application/json", authAlice, `{"IndicatorLED": "Lit"}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", "application/json", authAdmin, `{"ResetType": "On"}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", "application/json", authAdmin, `{"ResetType": "ForceOff"}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "application/json", authAdmin,
		`{"Image": "http://127.0.0.1:6180/redfish/boot-node.iso", "Inserted": true, "WriteProtected": true}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "application/json", authAdmin,
		`{"Image": "http://10.0.0.1/internal.iso"}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-1/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", "", authAdmin, ""},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-1/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", "application/json", authAdmin, "{}"},
	{"PATCH", "/redfish/v1/Systems/tenant-a.cp-2/SecureBoot", "application/json", authAdmin, `{"SecureBootEnable": true}`},
	{"GET", "/redfish/v1/TaskService/Tasks", "", authAdmin, ""},
	{"DELETE", "/redfish/v1/SessionService/Sessions/0000", "", authSession, ""},
	{"GET", "/redfish/v1/AccountService/Accounts", "", authViewer, ""},
	{"PUT", "/redfish/v1/Systems/tenant-a.cp-0", "application/json", authAdmin, `{}`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", "text/plain", authAdmin, `ResetType=On`},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", "application/x-www-form-urlencoded", authAdmin, `{"ResetType":"On"}`},
	{"GET", "/redfish/v1/Systems/tenant-b.cp-0", "", authAlice, ""},
	{"GET", "/redfish/v1/Systems/..%2f..%2fetc", "", authAdmin, ""},
	{"GET", "/redfish/v1/Systems/tenant-a.cp-0?$select=Id", "", authAdmin, ""},
	{"POST", "/redfish/v1/Systems/tenant-a.cp-0?$expand=*", "application/json", authAdmin, `{}`},
	{"GET", "/redfish/v1/$metadata", "", authNone, ""},
	{"GET", "/redfish/v1/odata", "", authNone, ""},
	{"HEAD", "/redfish/v1/Systems", "", authBadToken, ""},
	{"OPTIONS", "/redfish/v1/", "", authNone, ""},
	{"GET", "/readyz", "", authNone, ""},
	{"GET", "/metrics", "", authNone, ""},
}

func FuzzHTTP(f *testing.F) {
	for _, s := range httpSeeds {
		f.Add(s.method, s.target, s.contentType, s.auth, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, contentType string, auth uint8, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") || len(target) > 8<<10 {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		ft := fuzzServer(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := (&http.Request{
			Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "127.0.0.1", RemoteAddr: "192.0.2.7:40000",
			Body: http.NoBody, ContentLength: int64(len(body)),
		}).WithContext(ctx)
		if len(body) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if contentType != "" && !strings.ContainsAny(contentType, "\r\n") {
			req.Header.Set("Content-Type", contentType)
		}
		ft.authorize(req, auth)
		checkResponse(t, req, ft.serve(t, req))
	})
}

// FuzzEjectMediaBody: sushy posts EjectMedia with no body at all; anything else must be an
// empty JSON object. Whatever arrives, the answer is 204, 400 or 415, never more.
func FuzzEjectMediaBody(f *testing.F) {
	for _, s := range []struct{ body, ct string }{
		{"", ""}, {"{}", "application/json"}, {" {} \n", "application/json"}, {"{}", ""},
		{`{"Image":"x"}`, "application/json"}, {"null", "application/json"}, {"[]", "application/json"},
		{"{}", "text/plain"}, {"", "text/plain"}, {`{"@odata.type":"#x"}`, "application/json; charset=utf-8"},
	} {
		f.Add([]byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		ft := fuzzServer(t)
		req := httptest.NewRequest(http.MethodPost, "/redfish/v1/Systems/tenant-b.cp-0/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", bytes.NewReader(body))
		if contentType != "" && !strings.ContainsAny(contentType, "\r\n") {
			req.Header.Set("Content-Type", contentType)
		}
		ft.authorize(req, authAdmin)
		rec := ft.serve(t, req)
		checkResponse(t, req, rec)
		empty := len(bytes.TrimSpace(body)) == 0
		var obj map[string]any
		isEmptyObject := json.Unmarshal(body, &obj) == nil && obj != nil && len(obj) == 0
		switch rec.Code {
		case http.StatusNoContent:
			if !empty && !isEmptyObject {
				t.Fatalf("EjectMedia accepted the body %q", body)
			}
		case http.StatusBadRequest, http.StatusUnsupportedMediaType:
			// No body at all is always fine; blanks declared as something else than JSON are
			// a body of the wrong type.
			if len(body) == 0 || empty && rec.Code != http.StatusUnsupportedMediaType {
				t.Fatalf("EjectMedia without a body refused: %d %s", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("EjectMedia with %q: %d %s", body, rec.Code, rec.Body)
		}
	})
}
