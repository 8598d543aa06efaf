package server

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func TestServiceRootWithoutAuth(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/redfish/v1", "/redfish/v1/", "/redfish/v1?$expand=.", "/redfish/v1/?foo=bar"} {
		t.Run(path, func(t *testing.T) {
			resp, body := h.do(http.MethodGet, path, "", "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			assert.Equal(t, "4.0", resp.Header.Get("OData-Version"))
			assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
			assert.NotEmpty(t, resp.Header.Get("ETag"))
			var root map[string]any
			require.NoError(t, json.Unmarshal(body, &root))
			assert.Equal(t, "/redfish/v1", root["@odata.id"])
			assert.Equal(t, redfish.TypeServiceRoot, root["@odata.type"])
			assert.Equal(t, "RootService", root["Id"])
			assert.NotEmpty(t, root["RedfishVersion"])
			assert.NotEmpty(t, root["UUID"])
			assert.Equal(t, "KubeVirt", root["Vendor"])
			for key, want := range map[string]string{
				"Systems": "/redfish/v1/Systems", "Managers": "/redfish/v1/Managers",
				"Chassis": "/redfish/v1/Chassis", "SessionService": "/redfish/v1/SessionService",
			} {
				link, ok := root[key].(map[string]any)
				require.True(t, ok, key)
				assert.Equal(t, want, link["@odata.id"], key)
			}
			links, ok := root["Links"].(map[string]any)
			require.True(t, ok)
			sessions, ok := links["Sessions"].(map[string]any)
			require.True(t, ok)
			assert.Equal(t, "/redfish/v1/SessionService/Sessions", sessions["@odata.id"])
		})
	}
	// The same UUID on every request (and on every replica with the same config).
	a := h.getJSON("/redfish/v1", "")
	b := h.getJSON("/redfish/v1/", "admin")
	assert.Equal(t, a["UUID"], b["UUID"])
}

func TestVersionsDocument(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/redfish", "/redfish/"} {
		resp, body := h.do(http.MethodGet, path, "", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.JSONEq(t, `{"v1":"/redfish/v1/"}`, string(body))
	}
}

func TestMetadataIsXML(t *testing.T) {
	h := newHarness(t, false)
	resp, body := h.do(http.MethodGet, "/redfish/v1/$metadata", "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml"), resp.Header.Get("Content-Type"))
	assert.Equal(t, "4.0", resp.Header.Get("OData-Version"))
	// Well-formed XML with an Edmx root.
	dec := xml.NewDecoder(bytes.NewReader(body))
	var root string
	for {
		tok, err := dec.Token()
		if err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	assert.Equal(t, "Edmx", root)
	assert.Contains(t, string(body), "ComputerSystem_v1.xml")

	resp, body = h.do(http.MethodGet, "/redfish/v1/odata", "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		Context string `json:"@odata.context"`
		Value   []struct{ Name, Kind, URL string }
	}
	require.NoError(t, json.Unmarshal(body, &doc))
	assert.Equal(t, "/redfish/v1/$metadata", doc.Context)
	assert.NotEmpty(t, doc.Value)
}

func TestUnauthorized(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		name, method, path, user, body string
	}{
		{"no credentials", http.MethodGet, "/redfish/v1/Systems", "", ""},
		{"wrong password", http.MethodGet, "/redfish/v1/Systems", "admin-wrong", ""},
		{"unknown user", http.MethodGet, "/redfish/v1/Systems", "mallory", ""},
		{"system without credentials", http.MethodGet, "/redfish/v1/Systems/" + cpA0, "", ""},
		{"PATCH without credentials", http.MethodPatch, "/redfish/v1/Systems/" + cpA0, "", `{"Boot":{"BootSourceOverrideTarget":"Cd"}}`},
		{"Reset without credentials", http.MethodPost, "/redfish/v1/Systems/" + cpA0 + "/Actions/ComputerSystem.Reset", "", `{"ResetType":"On"}`},
		{"managers", http.MethodGet, "/redfish/v1/Managers", "", ""},
		{"session service", http.MethodGet, "/redfish/v1/SessionService", "", ""},
		{"DELETE without credentials", http.MethodDelete, "/redfish/v1/Systems/" + cpA0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			if tc.user == "admin-wrong" {
				req, err := http.NewRequest(tc.method, h.http.URL+tc.path, nil)
				require.NoError(t, err)
				req.SetBasicAuth("admin", "not-the-password")
				resp, err = h.http.Client().Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				body = readAll(t, resp)
			} else {
				resp, body = h.do(tc.method, tc.path, tc.user, tc.body, nil)
			}
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
			assert.Equal(t, `Basic realm="kubevirt-redfish"`, resp.Header.Get("WWW-Authenticate"))
			env := envelope(t, body)
			assert.Equal(t, reg+"NoValidSession", env.Error.Code)
		})
	}
	// Nothing changed.
	assert.Equal(t, virtv1.RunStrategyHalted, *h.vm("tenant-a", "cp-0").Spec.RunStrategy)
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return buf.Bytes()
}

func members(t *testing.T, coll map[string]any) []string {
	t.Helper()
	ms, ok := coll["Members"].([]any)
	require.True(t, ok, "Members must be an array: %v", coll)
	var out []string
	for _, m := range ms {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	assert.Equal(t, float64(len(out)), coll["Members@odata.count"])
	return out
}

func TestCollectionsFilteredByAllowlist(t *testing.T) {
	h := newHarness(t, false)
	all := []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2", "tenant-a.iso-0", "tenant-b.cp-0"}
	onlyA := all[:4]
	for _, coll := range []string{"Systems", "Managers", "Chassis"} {
		want := func(ids []string) []string {
			var out []string
			for _, id := range ids {
				out = append(out, "/redfish/v1/"+coll+"/"+id)
			}
			return out
		}
		assert.Equal(t, want(all), members(t, h.getJSON("/redfish/v1/"+coll, "admin")), coll)
		assert.Equal(t, want(all), members(t, h.getJSON("/redfish/v1/"+coll, "viewer")), coll)
		assert.Equal(t, want(onlyA), members(t, h.getJSON("/redfish/v1/"+coll, "alice")), coll)
	}
}

func TestForbiddenSystemLooksNonexistent(t *testing.T) {
	h := newHarness(t, false)
	for _, kind := range []string{"Systems", "Managers", "Chassis"} {
		t.Run(kind, func(t *testing.T) {
			// tenant-b.cp-0 exists but alice may not see it; tenant-b.cp-9 does not exist.
			// Both ids have the same length, so the bodies must be identical but for the id.
			forbidden, fbody := h.do(http.MethodGet, "/redfish/v1/"+kind+"/tenant-b.cp-0", "alice", "", nil)
			missing, mbody := h.do(http.MethodGet, "/redfish/v1/"+kind+"/tenant-b.cp-9", "alice", "", nil)
			require.Equal(t, http.StatusNotFound, forbidden.StatusCode, "%s", fbody)
			require.Equal(t, http.StatusNotFound, missing.StatusCode, "%s", mbody)
			assert.Equal(t, string(mbody), strings.ReplaceAll(string(fbody), "tenant-b.cp-0", "tenant-b.cp-9"))
			assert.Equal(t, missing.Header.Get("Content-Length"), forbidden.Header.Get("Content-Length"))
			assert.Equal(t, reg+"ResourceNotFound", envelope(t, fbody).Error.Code)

			// admin sees it.
			ok, _ := h.do(http.MethodGet, "/redfish/v1/"+kind+"/tenant-b.cp-0", "admin", "", nil)
			assert.Equal(t, http.StatusOK, ok.StatusCode)
		})
	}
	// Writes to a forbidden system are 404 too, never 403.
	resp, body := h.do(http.MethodPatch, "/redfish/v1/Systems/"+cpB0, "alice", `{"Boot":{"BootSourceOverrideTarget":"Cd"}}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	resp, body = h.do(http.MethodPost, "/redfish/v1/Systems/"+cpB0+"/Actions/ComputerSystem.Reset", "alice", `{"ResetType":"On"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	assert.Equal(t, virtv1.RunStrategyHalted, *h.vm("tenant-b", "cp-0").Spec.RunStrategy)
	assert.NotContains(t, h.vm("tenant-b", "cp-0").Annotations, kubevirt.BootAnnotation)

	// Ids that cannot name a VM, and namespaces outside the allowlist, are 404.
	for _, id := range []string{"tenant-c.cp-0", "nodot", "Tenant-A.cp-0", ".cp-0", "tenant-a."} {
		resp, _ := h.do(http.MethodGet, "/redfish/v1/Systems/"+id, "admin", "", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, id)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		method, path, user, allow string
	}{
		{http.MethodDelete, "/redfish/v1/Systems/" + cpA0, "admin", "GET, HEAD, PATCH"},
		{http.MethodPut, "/redfish/v1/Systems/" + cpA0, "admin", "GET, HEAD, PATCH"},
		{http.MethodPost, "/redfish/v1/Systems/" + cpA0, "admin", "GET, HEAD, PATCH"},
		{http.MethodPost, "/redfish/v1", "", "GET, HEAD"},
		{http.MethodPost, "/redfish/v1/", "", "GET, HEAD"},
		{http.MethodDelete, "/redfish/v1", "", "GET, HEAD"},
		{http.MethodPost, "/redfish/v1/Systems", "admin", "GET, HEAD"},
		{http.MethodPatch, "/redfish/v1/Managers/" + cpA0, "admin", "GET, HEAD"},
		{http.MethodGet, "/redfish/v1/Systems/" + cpA0 + "/Actions/ComputerSystem.Reset", "admin", "POST"},
		{http.MethodPost, "/redfish/v1/SessionService/Sessions", "admin", "GET, HEAD"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := h.do(tc.method, tc.path, tc.user, "", nil)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s", body)
			assert.Equal(t, tc.allow, resp.Header.Get("Allow"))
			assert.Equal(t, reg+"OperationNotAllowed", envelope(t, body).Error.Code)
		})
	}
	// Allow is also sent on successful requests.
	resp, _ := h.do(http.MethodGet, "/redfish/v1/Systems/"+cpA0, "admin", "", nil)
	assert.Equal(t, "GET, HEAD, PATCH", resp.Header.Get("Allow"))
}

func TestHead(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct{ path, user string }{
		{"/redfish/v1", ""},
		{"/redfish/v1/Systems", "admin"},
		{"/redfish/v1/Systems/" + cpA0, "admin"},
	} {
		get, getBody := h.do(http.MethodGet, tc.path, tc.user, "", nil)
		head, headBody := h.do(http.MethodHead, tc.path, tc.user, "", nil)
		require.Equal(t, http.StatusOK, head.StatusCode, tc.path)
		assert.Empty(t, headBody)
		assert.Equal(t, get.Header.Get("ETag"), head.Header.Get("ETag"), tc.path)
		assert.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"), tc.path)
		assert.NotEmpty(t, getBody)
	}
	resp, _ := h.do(http.MethodHead, "/redfish/v1/Systems", "", "", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "HEAD needs credentials where GET does")
}

// collectIDs gathers every @odata.id in a JSON document.
func collectIDs(v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && k == "@odata.id" {
				out[s] = true
			}
			collectIDs(val, out)
		}
	case []any:
		for _, val := range x {
			collectIDs(val, out)
		}
	}
}

func TestEveryLinkIsReachable(t *testing.T) {
	h := newHarness(t, false)
	for _, user := range []string{"admin", "alice", "viewer"} {
		t.Run(user, func(t *testing.T) {
			seen := map[string]bool{}
			queue := []string{"/redfish/v1"}
			for len(queue) > 0 {
				path := queue[0]
				queue = queue[1:]
				if seen[path] {
					continue
				}
				seen[path] = true
				resp, body := h.do(http.MethodGet, path, user, "", nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s as %s: %s", path, user, body)
				var doc map[string]any
				require.NoError(t, json.Unmarshal(body, &doc), path)
				if id, ok := doc["@odata.id"].(string); ok {
					assert.Equal(t, strings.TrimSuffix(path, "/"), id, "a resource names itself")
				}
				assert.NotEmpty(t, doc["@odata.type"], path)
				ids := map[string]bool{}
				collectIDs(doc, ids)
				for id := range ids {
					assert.True(t, strings.HasPrefix(id, "/redfish/v1"), "%s links to %s", path, id)
					queue = append(queue, id)
				}
			}
			var paths []string
			for p := range seen {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			if user == "alice" {
				for _, p := range paths {
					assert.NotContains(t, p, "tenant-b", "alice is never shown a link to tenant-b")
				}
				assert.Contains(t, paths, "/redfish/v1/Systems/"+cpA0)
			} else {
				assert.Contains(t, paths, "/redfish/v1/Systems/"+cpB0)
				assert.Contains(t, paths, "/redfish/v1/Managers/"+cpB0)
				assert.Contains(t, paths, "/redfish/v1/Chassis/"+cpB0)
			}
			assert.Contains(t, paths, "/redfish/v1/SessionService/Sessions")
		})
	}
}

// actionsOf walks a document and returns every object under an "Actions" key.
func actionsOf(v any, out map[string]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if k == "Actions" {
				if acts, ok := val.(map[string]any); ok {
					for name, a := range acts {
						if obj, ok := a.(map[string]any); ok {
							out[name] = obj
						}
					}
				}
			}
			actionsOf(val, out)
		}
	case []any:
		for _, val := range x {
			actionsOf(val, out)
		}
	}
}

func TestSystemResource(t *testing.T) {
	h := newHarness(t, false)
	doc := h.getJSON("/redfish/v1/Systems/"+cpA0, "admin")
	acts := map[string]map[string]any{}
	actionsOf(doc, acts)
	require.Contains(t, acts, "#ComputerSystem.Reset")
	for name, a := range acts {
		if strings.HasPrefix(name, "#") {
			assert.NotEmpty(t, a["target"], "action %s must have a target", name)
		}
	}
	reset := acts["#ComputerSystem.Reset"]
	assert.Equal(t, "/redfish/v1/Systems/"+cpA0+"/Actions/ComputerSystem.Reset", reset["target"])
	allowed, _ := reset["ResetType@Redfish.AllowableValues"].([]any)
	assert.ElementsMatch(t, []any{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PushPowerButton"}, allowed)
	assert.NotContains(t, allowed, "Nmi", "Nmi is not advertised")

	// The action target works.
	resp, body := h.do(http.MethodPost, reset["target"].(string), "admin", `{"ResetType":"ForceOff"}`, nil)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", body)

	boot, ok := doc["Boot"].(map[string]any)
	require.True(t, ok, "Boot is never omitted")
	assert.Equal(t, "None", boot["BootSourceOverrideTarget"])
	assert.Equal(t, "Disabled", boot["BootSourceOverrideEnabled"])
	assert.Equal(t, "UEFI", boot["BootSourceOverrideMode"])
	assert.NotEmpty(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"])
	assert.NotContains(t, doc, "@Redfish.Settings")

	assert.Equal(t, "KubeVirt", doc["Manufacturer"])
	assert.Equal(t, "Off", doc["PowerState"])
	assert.Equal(t, "5f1e6a3c-0000-4000-9000-000000000001", doc["UUID"], "the pinned firmware UUID")
	assert.Equal(t, "00000000-0000-4000-8000-000000000001", doc["SerialNumber"])
	links := doc["Links"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Managers/" + cpA0}}, links["ManagedBy"])
	ps := doc["ProcessorSummary"].(map[string]any)
	assert.Equal(t, float64(1), ps["Count"])
	assert.Equal(t, float64(4), ps["CoreCount"])
	mem := doc["MemorySummary"].(map[string]any)
	assert.Equal(t, float64(16), mem["TotalSystemMemoryGiB"])

	for _, path := range []string{"/redfish/v1/Managers/" + cpA0, "/redfish/v1/Chassis/" + cpA0} {
		d := h.getJSON(path, "admin")
		assert.Equal(t, "KubeVirt", d["Manufacturer"], path)
	}
	// Trailing slash on a member.
	resp, _ = h.do(http.MethodGet, "/redfish/v1/Systems/"+cpA0+"/", "admin", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestReadOnlyRole(t *testing.T) {
	h := newHarness(t, false)
	resp, body := h.do(http.MethodGet, "/redfish/v1/Systems/"+cpA0, "viewer", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	resp, body = h.do(http.MethodPost, "/redfish/v1/Systems/"+cpA0+"/Actions/ComputerSystem.Reset", "viewer", `{"ResetType":"On"}`, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	assert.Equal(t, reg+"InsufficientPrivilege", envelope(t, body).Error.Code)

	resp, body = h.do(http.MethodPatch, "/redfish/v1/Systems/"+cpA0, "viewer", `{"Boot":{"BootSourceOverrideTarget":"Cd"}}`, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	assert.Equal(t, reg+"InsufficientPrivilege", envelope(t, body).Error.Code)

	vm := h.vm("tenant-a", "cp-0")
	assert.Equal(t, virtv1.RunStrategyHalted, *vm.Spec.RunStrategy)
	assert.NotContains(t, vm.Annotations, kubevirt.BootAnnotation)

	// An Operator may write.
	resp, body = h.do(http.MethodPatch, "/redfish/v1/Systems/"+cpA0, "alice", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

func TestETagAndIfMatch(t *testing.T) {
	h := newHarness(t, false)
	path := "/redfish/v1/Systems/" + cpA0
	resp, body := h.do(http.MethodGet, path, "admin", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	assert.True(t, strings.HasPrefix(etag, `"`) && strings.HasSuffix(etag, `"`), "a strong ETag: %s", etag)
	assert.Equal(t, etagOf(body), etag)

	// The same representation gives the same ETag.
	again, _ := h.do(http.MethodGet, path, "admin", "", nil)
	assert.Equal(t, etag, again.Header.Get("ETag"))

	patch := `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Continuous"}}`
	for _, bad := range []string{`"0000"`, "W/" + etag, strings.Trim(etag, `"`)} {
		resp, body = h.do(http.MethodPatch, path, "admin", patch, map[string]string{"If-Match": bad})
		require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "If-Match %s: %s", bad, body)
		assert.Equal(t, reg+"PreconditionFailed", envelope(t, body).Error.Code)
	}
	assert.NotContains(t, h.vm("tenant-a", "cp-0").Annotations, kubevirt.BootAnnotation, "a failed precondition changes nothing")

	resp, body = h.do(http.MethodPatch, path, "admin", patch, map[string]string{"If-Match": `"other", ` + etag})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var cs redfish.ComputerSystem
	require.NoError(t, json.Unmarshal(body, &cs))
	assert.Equal(t, redfish.BootCd, cs.Boot.BootSourceOverrideTarget)
	assert.Equal(t, redfish.BootContinuous, cs.Boot.BootSourceOverrideEnabled)
	newTag := resp.Header.Get("ETag")
	assert.NotEqual(t, etag, newTag, "the representation changed")

	// The old ETag no longer matches.
	resp, _ = h.do(http.MethodPatch, path, "admin", `{"Boot":{"BootSourceOverrideTarget":"Hdd"}}`, map[string]string{"If-Match": etag})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	// "*" always matches.
	resp, body = h.do(http.MethodPatch, path, "admin", `{"Boot":{"BootSourceOverrideTarget":"Hdd"}}`, map[string]string{"If-Match": "*"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

func TestPatchErrorsOverHTTP(t *testing.T) {
	h := newHarness(t, false)
	path := "/redfish/v1/Systems/" + cpA0
	tests := []struct {
		name, body, code string
	}{
		{"malformed", `{"Boot":`, reg + "MalformedJSON"},
		{"empty", `{}`, reg + "EmptyJSON"},
		{"unknown", `{"Foo":1}`, reg + "PropertyUnknown"},
		{"read-only", `{"PowerState":"On"}`, reg + "PropertyNotWritable"},
		{"several", `{"Foo":1,"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, reg + "GeneralError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.do(http.MethodPatch, path, "admin", tc.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			assert.Equal(t, tc.code, envelope(t, body).Error.Code)
		})
	}
	resp, body := h.do(http.MethodPost, path+"/Actions/ComputerSystem.Reset", "admin", "", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "EjectMedia-style POST without a body: %s", body)
	assert.Equal(t, reg+"ActionParameterMissing", envelope(t, body).Error.Code)
	resp, body = h.do(http.MethodPost, path+"/Actions/ComputerSystem.Reset", "admin", `{"ResetType":"Nmi"}`, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, reg+"ActionParameterValueNotInList", envelope(t, body).Error.Code)

	resp, body = h.do(http.MethodGet, "/redfish/v1/NoSuchThing", "admin", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, reg+"ResourceNotFound", envelope(t, body).Error.Code)

	vm := h.vm("tenant-a", "cp-0")
	assert.NotContains(t, vm.Annotations, kubevirt.BootAnnotation, "no invalid PATCH changed anything")
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t, false)
	big := `{"Boot":{"BootSourceOverrideTarget":"Cd"},"Pad":"` + strings.Repeat("x", maxBody+16) + `"}`
	for _, tc := range []struct{ method, path string }{
		{http.MethodPatch, "/redfish/v1/Systems/" + cpA0},
		{http.MethodPost, "/redfish/v1/Systems/" + cpA0 + "/Actions/ComputerSystem.Reset"},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(big))
		req.SetBasicAuth("admin", passwords["admin"])
		rec := httptest.NewRecorder()
		h.server.ServeHTTP(rec, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "%s %s", tc.method, tc.path)
		envelope(t, rec.Body.Bytes())
	}
	// Exactly at the limit is read (and then judged on its content).
	atLimit := `{"Pad":"` + strings.Repeat("x", maxBody-len(`{"Pad":""}`)) + `"}`
	require.Len(t, atLimit, maxBody)
	req := httptest.NewRequest(http.MethodPatch, "/redfish/v1/Systems/"+cpA0, strings.NewReader(atLimit))
	req.SetBasicAuth("admin", passwords["admin"])
	rec := httptest.NewRecorder()
	h.server.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, reg+"PropertyUnknown", envelope(t, rec.Body.Bytes()).Error.Code)
}

func TestSessionService(t *testing.T) {
	h := newHarness(t, false)
	ss := h.getJSON("/redfish/v1/SessionService", "viewer")
	// This harness has no session store: login is not offered (sessions_test.go covers it).
	assert.Equal(t, false, ss["ServiceEnabled"])
	assert.Equal(t, "/redfish/v1/SessionService/Sessions", ss["Sessions"].(map[string]any)["@odata.id"])
	coll := h.getJSON("/redfish/v1/SessionService/Sessions", "viewer")
	assert.Empty(t, members(t, coll))
}

func TestBootModePatchShowsAtOnce(t *testing.T) {
	h := newHarness(t, false)
	cs := h.patchBoot(cpA0, `{"BootSourceOverrideMode":"Legacy"}`)
	assert.Equal(t, redfish.BootLegacy, cs.Boot.BootSourceOverrideMode, "the PATCH response shows the new mode")
	assert.Equal(t, redfish.BootLegacy, h.system(cpA0).Boot.BootSourceOverrideMode, "and so does the next GET")
	vm := h.vm("tenant-a", "cp-0")
	bl := vm.Spec.Template.Spec.Domain.Firmware.Bootloader
	require.NotNil(t, bl)
	assert.NotNil(t, bl.BIOS)
	assert.Nil(t, bl.EFI)
	assert.Equal(t, "5f1e6a3c-0000-4000-9000-000000000001", string(vm.Spec.Template.Spec.Domain.Firmware.UUID), "the firmware UUID survives")
	assert.Equal(t, redfish.BootNone, cs.Boot.BootSourceOverrideTarget, "a mode change leaves the override alone")
}

// Without the simulator nothing starts VMIs, so the state right after power-on stays
// PoweringOn and can be checked deterministically.
func TestPowerOnShowsPoweringOn(t *testing.T) {
	h := newHarness(t, false)
	require.Equal(t, redfish.PowerOff, h.system(cpA0).PowerState)
	h.reset(cpA0, redfish.ResetOn)
	seen, cs := h.powerStates(cpA0, func(cs redfish.ComputerSystem) bool { return cs.PowerState != redfish.PowerOff })
	assert.Equal(t, redfish.PowerPoweringOn, cs.PowerState, "states seen: %v", seen)
	assert.Equal(t, "Starting", cs.Status.State)
	vm := h.vm("tenant-a", "cp-0")
	assert.Equal(t, virtv1.RunStrategyOnce, *vm.Spec.RunStrategy, "powered on means runStrategy Once")

	// ForceOff while nothing runs just sets Halted.
	h.reset(cpA0, redfish.ResetForceOff)
	_, cs = h.powerStates(cpA0, func(cs redfish.ComputerSystem) bool { return cs.PowerState == redfish.PowerOff })
	assert.Equal(t, "StandbyOffline", cs.Status.State)
	assert.Equal(t, virtv1.RunStrategyHalted, *h.vm("tenant-a", "cp-0").Spec.RunStrategy)

	// Reset on an unknown system is 404.
	resp, _ := h.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.nope/Actions/ComputerSystem.Reset", "admin", `{"ResetType":"On"}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
