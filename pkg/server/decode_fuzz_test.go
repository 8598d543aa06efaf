package server

// Fuzz targets for every request-body decoder. The seeds are the bodies real clients send
// (sushy as Ironic drives it, gofish, redfishtool, curl walkthroughs; /work/shared/CLIENTS.md)
// plus the malformed shapes the table tests cover. `go test` runs the seeds; `make fuzz` runs
// each target for a bounded time:
//
//	go test -run='^$' -fuzz='^FuzzDecodeReset$' -fuzztime=20s ./pkg/server
//
// Every target checks more than "no panic": a decoder accepts only what it can carry out, and
// what it refuses is a well-formed 400-class Redfish error that leaks no credential.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Client traffic, verbatim where a trace exists.
var (
	resetSeeds = []string{
		`{"ResetType": "On"}`, `{"ResetType": "ForceOff"}`, `{"ResetType": "GracefulShutdown"}`,
		`{"ResetType": "GracefulRestart"}`, `{"ResetType": "ForceRestart"}`, `{"ResetType": "Nmi"}`,
		`{"ResetType":"PushPowerButton"}`, `{"ResetType":"On","@odata.type":"#ActionInfo"}`,
		``, `{}`, `{"ResetType":1}`, `{"ResetType":null}`, `{"ResetType":"On"}{}`, `[{"ResetType":"On"}]`,
		`{"ResetType":"On","Force":true}`, "{\"ResetType\":\"On\\u0000\"}", `{"ResetType":"On"`,
	}
	bootSeeds = []string{
		// sushy set_system_boot_options, the Ironic phases.
		`{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`,
		`{"Boot": {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}}`,
		`{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}}`,
		`{"Boot": {"BootSourceOverrideTarget": "Pxe"}}`,
		`{"Boot": {"BootSourceOverrideMode": "UEFI"}}`, `{"Boot": {"BootSourceOverrideMode": "Legacy"}}`,
		`{"Boot": {"BootSourceOverrideTarget": "UefiHttp", "HttpBootUri": "http://192.0.2.1/boot.efi"}}`,
		`{"Boot":{"BootSourceOverrideTarget":"BiosSetup","BootSourceOverrideEnabled":"Once"}}`,
		// gofish and redfishtool.
		`{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"Pxe"}}`,
		`{"Boot":{"BootSourceOverrideTarget":"None","BootSourceOverrideEnabled":"Disabled"}}`,
		// Echoed GETs, read-only and unknown properties, bad types.
		`{"@odata.etag":"\"abc\"","Boot":{"BootSourceOverrideTarget@Redfish.AllowableValues":["Cd"],"BootSourceOverrideTarget":"Cd"}}`,
		`{"PowerState":"On","Boot":{"BootSourceOverrideTarget":"Floppy","BootSourceOverrideEnabled":1,"Bar":true}}`,
		`{"Boot":null}`, `{"Boot":[]}`, `{"Boot":"Cd"}`, `{"Boot":{}}`, `{}`, ``, `{"Boot":{"BootSourceOverrideTarget":1.50}}`,
		`{"IndicatorLED":"Lit"}`, `{"LocationIndicatorActive":true,"IndicatorLED":"Off"}`,
		`{"IndicatorLED":"Blinking","Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}}`,
	}
	insertSeeds = []string{
		// sushy: Ironic's own image server, then every optional parameter it may add.
		`{"Image": "http://192.0.2.10:6180/redfish/boot-6f7c2a8e-4b1d-4b8e-9a55-3c1f0e9d2a11.iso"}`,
		`{"Image": "https://ironic.example.com:6183/redfish/boot-node.iso", "Inserted": true, "WriteProtected": true}`,
		`{"Image": "http://192.0.2.10/boot.iso", "TransferProtocolType": "HTTP", "TransferMethod": "Stream", "Inserted": true, "WriteProtected": true}`,
		`{"Image": "https://images.example.com/rhcos.iso", "UserName": "image-user", "Password": "image-password-1", "TransferProtocolType": "HTTPS"}`,
		`{"Image":"http://127.0.0.1:8080/agent.x86_64.iso","Inserted":true,"WriteProtected":true}`,
		`{"Image":"http://127.0.0.1:1/boot.iso?X-Amz-Signature=sig-topsecret","UserName":"image-user-secret","Password":"image-pw-secret"}`,
		`{"Image":"https://u:p@h.example/x.iso#frag","UserName":"u","Password":"p"}`,
		`{"Image":"ftp://h/x.iso"}`, `{"Image":"/x.iso"}`, `{"Image":""}`, `{"Image":1}`, `{"Image":"http://[::1]:80/x.iso"}`,
		`{"Image":"http://h/x.iso","TransferProtocolType":"HTTPS"}`, `{"Image":"http://h/x.iso","Password":"only-a-password"}`,
		`{}`, ``, `{"Inserted":false}`,
	}
	loginSeeds = []string{
		`{"UserName": "admin", "Password": "password"}`, `{"UserName":"tenant-a-installer","Password":"CHANGE-ME-tenant-a-password"}`,
		`{"UserName":"admin","Password":"password","@odata.type":"#Session.v1_0_0.Session"}`,
		`{"UserName":"admin"}`, `{"Password":"hunter2hunter2"}`, `{"UserName":1,"Password":["secret-in-array"]}`,
		`{"UserName":"admin","Password":"pw","Oem":{}}`, ``, `{}`, `null`,
	}
	secureBootSeeds = []string{
		`{"SecureBootEnable": true}`, `{"SecureBootEnable": false}`, `{"SecureBootEnable":"true"}`,
		`{"SecureBootMode":"UserMode"}`, `{"SecureBootEnable":true,"@odata.etag":"W/\"x\""}`,
		`{"Actions":{}}`, `{"ResetKeysType":"ResetAllKeysToDefault"}`, `{}`, ``,
	}
	querySeeds = []string{
		"", "$expand=*", "$expand=.($levels=1)", "$expand=~($levels=3)", "%24expand=%2A", "$expand=*($levels=0)",
		"$expand=*($levels=99999999999999999999)", "$select=Id", "$top=1&$skip=1", "rpvunknown=1", "a=b&&c",
		"$expand", "$filter=Id eq 'x'", "%zz=1", "$expand=%zz",
	}
)

// checkError asserts that a decoder error is a client error with a well-formed envelope.
func checkError(t *testing.T, e *redfish.Error, body []byte) {
	t.Helper()
	if e.Status < 400 || e.Status >= 500 {
		t.Fatalf("status %d for bad input %q", e.Status, body)
	}
	if len(e.Messages) == 0 {
		t.Fatalf("error without messages for %q", body)
	}
	for _, m := range e.Messages {
		if !strings.HasPrefix(m.MessageID, redfish.BaseRegistry+".") || m.Message == "" {
			t.Fatalf("bad message %+v for %q", m, body)
		}
	}
	if _, err := json.Marshal(e.Envelope()); err != nil {
		t.Fatalf("envelope does not marshal: %v", err)
	}
}

// checkNoLeak fails when a secret value sent under key shows up in the error, unless the
// same text also appears elsewhere in the body (then the error may be quoting that).
func checkNoLeak(t *testing.T, e *redfish.Error, body []byte, keys ...string) {
	t.Helper()
	if e == nil {
		return
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return
	}
	rendered, _ := json.Marshal(e.Envelope())
	for _, k := range keys {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		enc, _ := json.Marshal(raw)
		secret := strings.Trim(string(enc), `"`)
		if s, isStr := raw.(string); isStr {
			secret = s
		}
		if len(secret) < 6 || bytes.Count(body, []byte(secret)) > 1 {
			continue
		}
		if bytes.Contains(rendered, []byte(secret)) {
			t.Fatalf("the value of %s leaks into the error: %s", k, rendered)
		}
	}
}

// messageIDs is the sorted list of message ids: decoders walk maps, so order varies.
func messageIDs(e *redfish.Error) string {
	if e == nil {
		return ""
	}
	ids := make([]string, 0, len(e.Messages))
	for _, m := range e.Messages {
		ids = append(ids, m.MessageID+"|"+strings.Join(m.MessageArgs, ","))
	}
	sort.Strings(ids)
	return strings.Join(ids, ";")
}

func addSeeds(f *testing.F, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

func FuzzDecodeReset(f *testing.F) {
	addSeeds(f, resetSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		rt, e := decodeReset(body)
		if e != nil {
			checkError(t, e, body)
			if rt != "" {
				t.Fatalf("error and a reset type %q", rt)
			}
			return
		}
		if !redfish.Contains(redfish.ResetTypes, rt) {
			t.Fatalf("accepted reset type %q that is not advertised, from %q", rt, body)
		}
		again, e2 := decodeReset([]byte(`{"ResetType":"` + string(rt) + `"}`))
		if e2 != nil || again != rt {
			t.Fatalf("canonical body of %q does not decode the same", rt)
		}
	})
}

func FuzzDecodeSystemPatch(f *testing.F) {
	addSeeds(f, bootSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeSystemPatch(body)
		_, e2 := decodeSystemPatch(body)
		if messageIDs(e) != messageIDs(e2) {
			t.Fatalf("decoding %q twice differs: %v / %v", body, e, e2)
		}
		if e != nil {
			checkError(t, e, body)
			return
		}
		if req.Target == nil && req.Enabled == nil && req.Mode == nil {
			t.Fatalf("accepted %q without any change", body)
		}
		if req.Target != nil && !redfish.Contains(redfish.BootTargets, *req.Target) ||
			req.Enabled != nil && !redfish.Contains(redfish.BootEnabledValues, *req.Enabled) ||
			req.Mode != nil && !redfish.Contains(redfish.BootModes, *req.Mode) {
			t.Fatalf("accepted a value outside the advertised ones from %q: %+v", body, req)
		}
		// The canonical form of what was accepted decodes to the same request.
		boot := map[string]any{}
		if req.Target != nil {
			boot["BootSourceOverrideTarget"] = *req.Target
		}
		if req.Enabled != nil {
			boot["BootSourceOverrideEnabled"] = *req.Enabled
		}
		if req.Mode != nil {
			boot["BootSourceOverrideMode"] = *req.Mode
		}
		canon, _ := json.Marshal(map[string]any{"Boot": boot})
		again, e3 := decodeSystemPatch(canon)
		if e3 != nil {
			t.Fatalf("canonical %s refused: %v", canon, e3)
		}
		if fuzzJSON(again) != fuzzJSON(req) {
			t.Fatalf("canonical %s decodes to %+v, not %+v", canon, again, req)
		}
	})
}

// FuzzDecodeSystemSettings covers the ComputerSystem PATCH with the indicator LED, which
// patchComputerSystem routes through decodeObject and decodeSystemSettings.
func FuzzDecodeSystemSettings(f *testing.F) {
	addSeeds(f, bootSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, e := decodeObject(body)
		if e != nil {
			checkError(t, e, body)
			return
		}
		s, e := decodeSystemSettings(obj)
		if e != nil {
			checkError(t, e, body)
			return
		}
		if s.IndicatorLED != nil && !redfish.Contains(redfish.IndicatorLEDs, *s.IndicatorLED) {
			t.Fatalf("accepted LED %q from %q", *s.IndicatorLED, body)
		}
	})
}

func FuzzDecodeInsertMedia(f *testing.F) {
	addSeeds(f, insertSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeInsertMedia(body)
		checkNoLeak(t, e, body, "Password", "UserName")
		if e != nil {
			checkError(t, e, body)
			if req.Image != "" || req.Password != "" {
				t.Fatalf("error with a request %+v", req)
			}
			return
		}
		if checkImageURL(req.Image) != nil {
			t.Fatalf("accepted an image URL its own check refuses: %q", req.Image)
		}
		if (req.UserName == "") != (req.Password == "") {
			t.Fatalf("accepted a user name without a password or the reverse: %q", body)
		}
	})
}

func FuzzDecodeLogin(f *testing.F) {
	addSeeds(f, loginSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		user, pass, e := decodeLogin(body)
		checkNoLeak(t, e, body, "Password")
		if e != nil {
			checkError(t, e, body)
			if user != "" || pass != "" {
				t.Fatal("error with credentials returned")
			}
			return
		}
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&obj); err != nil || obj["UserName"] != user || obj["Password"] != pass {
			t.Fatalf("accepted %q as %q/%q", body, user, pass)
		}
	})
}

func FuzzDecodeSecureBootPatch(f *testing.F) {
	addSeeds(f, secureBootSeeds)
	f.Fuzz(func(t *testing.T, body []byte) {
		enable, e := decodeSecureBootPatch(body)
		if e != nil {
			checkError(t, e, body)
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil || obj["SecureBootEnable"] != enable {
			t.Fatalf("accepted %q as %v", body, enable)
		}
	})
}

// FuzzParseQuery covers the URL query rules applied to every Redfish request.
func FuzzParseQuery(f *testing.F) {
	for _, q := range querySeeds {
		f.Add(http.MethodGet, q)
		f.Add(http.MethodPost, q)
	}
	f.Fuzz(func(t *testing.T, method, raw string) {
		exp, e := parseQuery(method, raw)
		if e != nil {
			// 501 is what DSP0266 prescribes for an unsupported $ parameter.
			if e.Status != http.StatusBadRequest && e.Status != http.StatusNotImplemented {
				t.Fatalf("status %d for query %q", e.Status, raw)
			}
			return
		}
		if exp == nil {
			return
		}
		if method != http.MethodGet && method != http.MethodHead {
			t.Fatalf("$expand accepted on %s", method)
		}
		if !strings.ContainsRune("*.~", rune(exp.mode)) || exp.levels < 1 || exp.levels > redfish.MaxExpandLevels {
			t.Fatalf("expansion %+v from %q", *exp, raw)
		}
	})
}

func fuzzJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
