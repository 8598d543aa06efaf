package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// linkOf must give describedBy's answer for every body writeJSON writes.
func TestLinkOfMatchesDescribedBy(t *testing.T) {
	vm, vmi := benchMachine(0)
	bodies := []any{
		map[string]string{"v1": "/redfish/v1/"},
		redfish.NewCollection(redfish.SystemsURI, redfish.TypeSystemColl, "Computer System Collection", []string{"/redfish/v1/Systems/a.b"}),
		redfish.NewCollection(redfish.SystemsURI, redfish.TypeSystemColl, "Computer System Collection", nil),
		struct {
			Context string `json:"@odata.context"`
			Value   []int  `json:"value"`
		}{"/redfish/v1/$metadata", []int{1}},
		struct {
			Members []string `json:"Members"`
			Type    string   `json:"@odata.type"`
		}{[]string{"x"}, "#Foo.v1_0_0.Foo"},
		struct {
			Type string `json:"@odata.type"`
		}{"NoHash.v1_0_0.Foo"},
		struct {
			Type int `json:"@odata.type"`
		}{3},
		struct {
			Inner struct {
				Type string `json:"@odata.type"`
			} `json:"Inner"`
			Type string `json:"@odata.type"`
		}{struct {
			Type string `json:"@odata.type"`
		}{"#Inner.v1_0_0.Inner"}, "#Outer.v1_2_3.Outer"},
		map[string]string{"@odata.id": `/a"b\c`, "@odata.type": "#Quoted\".v1_0_0.X"},
		redfish.InternalError().Envelope(),
		[]string{"not", "an", "object"},
		"string",
	}
	bodies = append(bodies, systemResource(kubevirt.Machine{VM: vm, VMI: vmi}), systemResource(kubevirt.Machine{VM: vm}))
	for _, v := range bodies {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, describedBy(b), linkOf(b), "%s", b)
		assert.Equal(t, describedBy(b), linkOf(b), "%s (cached)", b)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                           false,
		"gzip":                       true,
		"gzip, deflate":              true,
		"deflate, GZIP;q=0.5":        true,
		"br;q=1.0, gzip;q=0":         false,
		"gzip; q=0.0":                false,
		"*":                          true,
		"identity":                   false,
		"x-gzip":                     true,
		"deflate, br, zstd":          false,
		"gzip;q=0.001, identity;q=1": true,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if header != "" {
			r.Header.Set("Accept-Encoding", header)
		}
		assert.Equal(t, want, acceptsGzip(r), "%q", header)
	}
}

func gzGet(t *testing.T, s *Server, path, acceptEncoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.SetBasicAuth("admin", benchPassword)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, "GET %s: %s", path, w.Body)
	return w
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// Large collections are compressed for clients that accept gzip; small resources never are.
func TestLargeCollectionsAreGzipped(t *testing.T) {
	s := benchServer(t, 1000) // ~50 KB of members

	plain := gzGet(t, s, "/redfish/v1/Systems", "")
	assert.Empty(t, plain.Header().Get("Content-Encoding"))
	assert.Equal(t, "Accept-Encoding", plain.Header().Get("Vary"))
	require.GreaterOrEqual(t, plain.Body.Len(), gzipMinBytes)

	zipped := gzGet(t, s, "/redfish/v1/Systems", "gzip, deflate")
	h := zipped.Header()
	assert.Equal(t, "gzip", h.Get("Content-Encoding"))
	assert.Equal(t, "Accept-Encoding", h.Get("Vary"))
	assert.Equal(t, plain.Header().Get("Link"), h.Get("Link"))
	assert.Equal(t, h.Get("Content-Length"), strconv.Itoa(zipped.Body.Len()))
	assert.Less(t, zipped.Body.Len(), plain.Body.Len()/5)
	etag := plain.Header().Get("ETag")
	assert.Equal(t, etag[:len(etag)-1]+`-gzip"`, h.Get("ETag"), "a different strong ETag for a different representation")
	assert.Equal(t, plain.Body.String(), string(gunzip(t, zipped.Body.Bytes())))

	refused := gzGet(t, s, "/redfish/v1/Systems", "gzip;q=0")
	assert.Empty(t, refused.Header().Get("Content-Encoding"))

	system := gzGet(t, s, "/redfish/v1/Systems/bench-0.vm-00000", "gzip, deflate")
	assert.Empty(t, system.Header().Get("Content-Encoding"), "a ComputerSystem is too small to be worth compressing")
	assert.Empty(t, system.Header().Get("Vary"))
	small := gzGet(t, benchServer(t, 10), "/redfish/v1/Systems", "gzip")
	assert.Empty(t, small.Header().Get("Content-Encoding"))
}

// $expand decodes the responses it composes: a gzip-accepting client still gets them expanded.
func TestExpandWithGzipAccepted(t *testing.T) {
	s := benchServer(t, 1000)
	w := gzGet(t, s, "/redfish/v1/Systems?$expand=.", "gzip, deflate")
	body := w.Body.Bytes()
	if w.Header().Get("Content-Encoding") == "gzip" {
		body = gunzip(t, body)
	}
	var coll struct {
		Members []map[string]any `json:"Members"`
	}
	require.NoError(t, json.Unmarshal(body, &coll))
	require.Len(t, coll.Members, 1000)
	assert.Equal(t, "bench-0.vm-00000", coll.Members[0]["Id"], "members are expanded")

	w = gzGet(t, s, "/redfish/v1?$expand=.", "gzip, deflate")
	body = w.Body.Bytes()
	if w.Header().Get("Content-Encoding") == "gzip" {
		body = gunzip(t, body)
	}
	var root struct {
		Systems struct {
			Members []any `json:"Members"`
		} `json:"Systems"`
	}
	require.NoError(t, json.Unmarshal(body, &root))
	assert.Len(t, root.Systems.Members, 1000, "the Systems collection is expanded into the service root")
}
