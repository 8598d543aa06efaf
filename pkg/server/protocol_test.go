package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func TestDescribedBy(t *testing.T) {
	tests := map[string]string{
		`{"@odata.type":"#ComputerSystem.v1_22_0.ComputerSystem"}`:                    "<http://redfish.dmtf.org/schemas/v1/ComputerSystem.v1_22_0.json>; rel=describedby",
		`{"@odata.id":"/x","@odata.type":"#ProcessorCollection.ProcessorCollection"}`: "<http://redfish.dmtf.org/schemas/v1/ProcessorCollection.json>; rel=describedby",
		`{"@odata.context":"/redfish/v1/$metadata","value":[]}`:                       "",
		`{"error":{"code":"Base.1.19.0.GeneralError"}}`:                               "",
		`{"@odata.type":"ComputerSystem"}`:                                            "",
		`not json`:                                                                    "",
	}
	for body, want := range tests {
		assert.Equal(t, want, describedBy([]byte(body)), body)
	}
}

// The Link header names the JSON schema of the very version @odata.type names, on GET and
// HEAD of every kind of resource.
func TestLinkHeader(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/redfish/v1/", "/redfish/v1/Systems", sys(cpA0), sys(cpA0) + "/Processors/0",
		sys(cpA0) + "/EthernetInterfaces/default", sys(cpA0) + "/Storage/1", sys(cpA0) + "/SecureBoot", sys(cpA0) + "/Bios",
		"/redfish/v1/SessionService/Sessions", "/redfish/v1/Managers/" + cpA0} {
		resp, body := h.do(http.MethodGet, path, "admin", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		var doc struct {
			Type string `json:"@odata.type"`
		}
		require.NoError(t, json.Unmarshal(body, &doc))
		parts := strings.Split(strings.TrimPrefix(doc.Type, "#"), ".")
		schema := parts[0]
		if len(parts) == 3 {
			schema += "." + parts[1]
		}
		want := "<http://redfish.dmtf.org/schemas/v1/" + schema + ".json>; rel=describedby"
		assert.Equal(t, want, resp.Header.Get("Link"), path)
		head, _ := h.do(http.MethodHead, path, "admin", "", nil)
		assert.Equal(t, want, head.Header.Get("Link"), "HEAD %s", path)
		assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), path)
	}
	resp, _ := h.do(http.MethodGet, "/redfish/v1/nowhere", "admin", "", nil)
	assert.Empty(t, resp.Header.Get("Link"), "an error has no schema")
}

func TestODataVersionHeader(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct {
		version string
		status  int
	}{{"", http.StatusOK}, {"4.0", http.StatusOK}, {"4.1", http.StatusPreconditionFailed}, {"3.0", http.StatusPreconditionFailed}, {"4.01", http.StatusPreconditionFailed}} {
		for _, path := range []string{"/redfish/v1/", sys(cpA0)} {
			hdr := map[string]string{}
			if tc.version != "" {
				hdr["OData-Version"] = tc.version
			}
			resp, body := h.do(http.MethodGet, path, "admin", "", hdr)
			require.Equal(t, tc.status, resp.StatusCode, "OData-Version %q on %s: %s", tc.version, path, body)
			if tc.status != http.StatusOK {
				env := envelope(t, body)
				assert.Contains(t, env.Error.Message, tc.version)
			}
		}
	}
	// Writes too: nothing changes.
	resp, _ := h.do(http.MethodPatch, sys(cpA0), "admin", `{"IndicatorLED":"Lit"}`, map[string]string{"OData-Version": "4.1"})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Equal(t, "Off", h.getJSON(sys(cpA0), "admin")["IndicatorLED"])
}

func TestQueryParameters(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		query  string
		status int
		id     string
	}{
		{"rpvunknown", http.StatusOK, ""},
		{"foo=bar&only", http.StatusOK, ""},
		{"excerpt", http.StatusOK, ""},
		{"$rpvunknown", http.StatusNotImplemented, "QueryNotSupported"},
		{"$select=Id", http.StatusNotImplemented, "QueryNotSupported"},
		{"$filter=Id%20eq%201", http.StatusNotImplemented, "QueryNotSupported"},
		{"$top=1", http.StatusNotImplemented, "QueryNotSupported"},
		{"$skip=1", http.StatusNotImplemented, "QueryNotSupported"},
		{"%24top=1", http.StatusNotImplemented, "QueryNotSupported"},
		{"$levels=1", http.StatusNotImplemented, "QueryNotSupported"},
		{"$expand=.", http.StatusOK, ""},
		{"$expand=*", http.StatusOK, ""},
		{"$expand=~", http.StatusOK, ""},
		{"$expand=.($levels=1)", http.StatusOK, ""},
		{"$expand=%2E%28%24levels%3D2%29", http.StatusOK, ""},
		{"$expand=*($levels=3)", http.StatusOK, ""},
		{"$expand=", http.StatusBadRequest, "QueryParameterValueFormatError"},
		{"$expand=Members", http.StatusBadRequest, "QueryParameterValueFormatError"},
		{"$expand=.($levels=x)", http.StatusBadRequest, "QueryParameterValueFormatError"},
		{"$expand=.($levels=0)", http.StatusBadRequest, "QueryParameterOutOfRange"},
		{"$expand=.($levels=4)", http.StatusBadRequest, "QueryParameterOutOfRange"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			resp, body := h.do(http.MethodGet, "/redfish/v1/Systems?"+tc.query, "admin", "", nil)
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			if tc.id != "" {
				assert.Equal(t, reg+tc.id, envelope(t, body).Error.Code)
			}
		})
	}
	// The service root declares exactly this.
	root := h.getJSON("/redfish/v1", "")
	pf := root["ProtocolFeaturesSupported"].(map[string]any)
	assert.Equal(t, map[string]any{"ExpandAll": true, "Levels": true, "Links": true, "NoLinks": true, "MaxLevels": float64(redfish.MaxExpandLevels)}, pf["ExpandQuery"])
	for _, k := range []string{"FilterQuery", "SelectQuery", "OnlyMemberQuery", "ExcerptQuery", "TopSkipQuery"} {
		assert.Equal(t, false, pf[k], k)
	}
	// $expand is for reads.
	resp, body := h.do(http.MethodPatch, sys(cpA0)+"?$expand=.", "admin", `{"IndicatorLED":"Lit"}`, nil)
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode, "%s", body)
	// Unknown plain parameters never stop a write.
	resp, body = h.do(http.MethodPatch, sys(cpA0)+"?foo=1", "admin", `{"IndicatorLED":"Lit"}`, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

func TestExpand(t *testing.T) {
	h := newHarness(t, false)

	// "." expands the members of a collection.
	coll := h.getJSON("/redfish/v1/Systems?$expand=.", "alice")
	members := coll["Members"].([]any)
	require.NotEmpty(t, members)
	for _, m := range members {
		obj := m.(map[string]any)
		assert.Equal(t, redfish.TypeComputerSystem, obj["@odata.type"], "expanded member")
		assert.NotContains(t, obj["Id"], "tenant-b", "alice still sees only tenant-a")
		assert.Equal(t, map[string]any{"@odata.id": obj["@odata.id"].(string) + "/Processors"}, obj["Processors"], "one level only")
	}

	// What sushy sends for storage: the Storage members with their own navigation properties
	// one level down.
	st := h.getJSON(sys(cpA0)+"/Storage?$expand=.($levels=1)", "admin")
	s1 := st["Members"].([]any)[0].(map[string]any)
	assert.Equal(t, redfish.TypeStorage, s1["@odata.type"])
	assert.Equal(t, map[string]any{"@odata.id": sys(cpA0) + "/Storage/1/Volumes"}, s1["Volumes"])

	// "." leaves Links alone, "~" expands only them, "*" both.
	dot := h.getJSON(sys(cpA0)+"?$expand=.", "admin")
	assert.Equal(t, redfish.TypeProcessorColl, dot["Processors"].(map[string]any)["@odata.type"])
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Managers/" + cpA0}}, dot["Links"].(map[string]any)["ManagedBy"])
	tilde := h.getJSON(sys(cpA0)+"?$expand=~", "admin")
	assert.Equal(t, map[string]any{"@odata.id": sys(cpA0) + "/Processors"}, tilde["Processors"])
	mgr := tilde["Links"].(map[string]any)["ManagedBy"].([]any)[0].(map[string]any)
	assert.Equal(t, redfish.TypeManager, mgr["@odata.type"])
	star := h.getJSON(sys(cpA0)+"?$expand=*", "admin")
	assert.Equal(t, redfish.TypeProcessorColl, star["Processors"].(map[string]any)["@odata.type"])
	assert.Equal(t, redfish.TypeChassis, star["Links"].(map[string]any)["Chassis"].([]any)[0].(map[string]any)["@odata.type"])

	// Two levels: the processor collection and its members.
	two := h.getJSON(sys(cpA0)+"?$expand=.($levels=2)", "admin")
	p0 := two["Processors"].(map[string]any)["Members"].([]any)[0].(map[string]any)
	assert.Equal(t, "x86-64", p0["InstructionSet"])

	// Public resources expand only what the caller may read.
	root := h.getJSON("/redfish/v1?$expand=.", "")
	assert.Equal(t, map[string]any{"@odata.id": "/redfish/v1/Systems"}, root["Systems"], "no credentials, no systems")
	root = h.getJSON("/redfish/v1?$expand=.", "admin")
	assert.Equal(t, redfish.TypeSystemColl, root["Systems"].(map[string]any)["@odata.type"])

	// The expanded representation has its own ETag; HEAD matches GET.
	get, body := h.do(http.MethodGet, sys(cpA0)+"?$expand=*", "admin", "", nil)
	plain, _ := h.do(http.MethodGet, sys(cpA0), "admin", "", nil)
	assert.Equal(t, etagOf(body), get.Header.Get("ETag"))
	assert.NotEqual(t, plain.Header.Get("ETag"), get.Header.Get("ETag"))
	head, headBody := h.do(http.MethodHead, sys(cpA0)+"?$expand=*", "admin", "", nil)
	assert.Equal(t, http.StatusOK, head.StatusCode)
	assert.Empty(t, headBody)
	assert.Equal(t, get.Header.Get("ETag"), head.Header.Get("ETag"))
	assert.Equal(t, get.Header.Get("Link"), head.Header.Get("Link"))
	assert.Equal(t, "GET, HEAD, PATCH", get.Header.Get("Allow"))

	// Errors pass through unexpanded.
	resp, body := h.do(http.MethodGet, sys("tenant-a.nope")+"?$expand=.", "admin", "", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, reg+"ResourceNotFound", envelope(t, body).Error.Code)
	resp, _ = h.do(http.MethodGet, sys(cpA0)+"?$expand=.", "", "", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestConnectionClose(t *testing.T) {
	h := newHarness(t, false)
	resp, body := h.do(http.MethodGet, "/redfish/v1/", "", "", map[string]string{"Connection": "close"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.True(t, resp.Close, "the server answers Connection: close and closes the connection")
}

func TestTrailingSlashesOnInventory(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{sys(cpA0) + "/Processors/", sys(cpA0) + "/SecureBoot/", sys(cpA0) + "/Storage/1/Controllers/"} {
		resp, body := h.do(http.MethodGet, path, "admin", "", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
}

func TestUnknownMethodGets405WithAllow(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct{ path, user, allow string }{
		{"/redfish/v1/", "", "GET, HEAD"},
		{sys(cpA0), "admin", "GET, HEAD, PATCH"},
		{sys(cpA0) + "/SecureBoot", "admin", "GET, HEAD, PATCH"},
	} {
		resp, body := h.do("FAKEMETHODFORTEST", tc.path, tc.user, "", nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s: %s", tc.path, body)
		assert.Equal(t, tc.allow, resp.Header.Get("Allow"), tc.path)
		assert.Equal(t, reg+"OperationNotAllowed", envelope(t, body).Error.Code)
	}
}
