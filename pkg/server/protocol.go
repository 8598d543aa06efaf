package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Request rules of DSP0266 that hold for every Redfish URI, applied before routing:
//
//   - OData-Version: a request naming another version than 4.0 gets 412.
//   - Query parameters: those not starting with $ (sushy's, the Protocol Validator's
//     ?rpvunknown) are ignored; $expand is carried out here, for GET and HEAD; any other $
//     parameter ($select, $filter, $top, $skip, ...) gets 501 QueryNotSupported. This matches
//     ServiceRoot.ProtocolFeaturesSupported (redfish.SupportedProtocolFeatures).
//
// Connection: close needs nothing here: net/http closes the connection after the response and
// says so in the response's Connection header.

// schemaBase is where DMTF publishes the JSON schemas the Link header points at.
const schemaBase = "http://redfish.dmtf.org/schemas/v1/"

// describedBy is the Link header of a resource body: rel=describedby to the JSON schema of
// its @odata.type, versioned for a versioned type ("" without a type).
func describedBy(body []byte) string {
	var head struct {
		Type string `json:"@odata.type"`
	}
	if json.Unmarshal(body, &head) != nil || !strings.HasPrefix(head.Type, "#") {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(head.Type, "#"), ".")
	var schema string
	switch len(parts) {
	case 3: // Namespace.v1_2_3.Type
		schema = parts[0] + "." + parts[1]
	case 2: // Namespace.Type: an unversioned (collection) schema
		schema = parts[0]
	default:
		return ""
	}
	return "<" + schemaBase + schema + ".json>; rel=describedby"
}

// protocol is the middleware that applies the request rules above.
func (s *Server) protocol(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/redfish") {
			next.ServeHTTP(w, r)
			return
		}
		if v := r.Header.Get("OData-Version"); v != "" && v != "4.0" {
			writeError(w, redfish.UnsupportedODataVersion(v))
			return
		}
		exp, rerr := parseQuery(r.Method, r.URL.RawQuery)
		if rerr != nil {
			writeError(w, rerr)
			return
		}
		if exp == nil {
			next.ServeHTTP(w, r)
			return
		}
		s.expand(w, r, next, *exp)
	})
}

// expansion is a parsed $expand: which hyperlinks ("*" all, "." those outside Links, "~"
// those inside Links) and how many levels deep.
type expansion struct {
	mode   byte
	levels int
}

// wants reports whether a hyperlink found inside (or outside) a Links property is expanded.
func (e expansion) wants(inLinks bool) bool {
	switch e.mode {
	case '*':
		return true
	case '.':
		return !inLinks
	}
	return inLinks
}

var expandSyntax = regexp.MustCompile(`^([*.~])(?:\(\$levels=([0-9]+)\))?$`)

// parseQuery checks the query parameters and returns the $expand to carry out, if any.
func parseQuery(method, raw string) (*expansion, *redfish.Error) {
	var exp *expansion
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if !strings.HasPrefix(k, "$") {
			continue // DSP0266: unknown parameters without $ are ignored
		}
		if k != "$expand" || (method != http.MethodGet && method != http.MethodHead) {
			return nil, redfish.QueryNotSupported(k)
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		m := expandSyntax.FindStringSubmatch(v)
		if m == nil {
			return nil, redfish.QueryParameterValueFormatError(v, "$expand")
		}
		e := expansion{mode: m[1][0], levels: 1}
		if m[2] != "" {
			n, err := strconv.Atoi(m[2])
			if err != nil || n < 1 || n > redfish.MaxExpandLevels {
				return nil, redfish.QueryParameterOutOfRange(m[2], "$levels", "1 to "+strconv.Itoa(redfish.MaxExpandLevels))
			}
			e.levels = n
		}
		exp = &e
	}
	return exp, nil
}

// bufferedResponse collects a handler's response so it can be rewritten.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{header: http.Header{}} }

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// maxExpandFetches bounds the resources one $expand reads.
const maxExpandFetches = 500

// expand serves a request with $expand: the resource as usual, then every hyperlink the
// expansion selects replaced by the resource it names, read with the caller's credentials
// (a resource the caller may not read stays a hyperlink).
func (s *Server) expand(w http.ResponseWriter, r *http.Request, next http.Handler, e expansion) {
	head := r.Method == http.MethodHead
	inner := r
	if head {
		inner = r.Clone(r.Context())
		inner.Method = http.MethodGet
	}
	buf := newBufferedResponse()
	next.ServeHTTP(buf, inner)
	var doc any
	dec := json.NewDecoder(bytes.NewReader(buf.body.Bytes()))
	dec.UseNumber()
	if buf.status != http.StatusOK || !strings.HasPrefix(buf.header.Get("Content-Type"), "application/json") || dec.Decode(&doc) != nil {
		buf.copyTo(w, head)
		return
	}
	budget := maxExpandFetches
	doc = s.expandValue(r, doc, e, e.levels, false, &budget)
	body, err := json.Marshal(doc)
	if err != nil {
		buf.copyTo(w, head)
		return
	}
	buf.body.Reset()
	buf.body.Write(body)
	buf.header.Set("ETag", etagOf(body))
	buf.header.Set("Content-Length", strconv.Itoa(len(body)))
	buf.copyTo(w, head)
}

func (b *bufferedResponse) copyTo(w http.ResponseWriter, head bool) {
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if !head {
		_, _ = w.Write(b.body.Bytes())
	}
}

// expandValue walks a JSON value and expands the hyperlinks e selects. inLinks tells whether
// v lies inside a Links property of the resource being expanded.
func (s *Server) expandValue(r *http.Request, v any, e expansion, levels int, inLinks bool, budget *int) any {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := hyperlink(x); ok {
			if !e.wants(inLinks) {
				return x
			}
			doc, ok := s.fetchForExpand(r, id, budget)
			if !ok {
				return x
			}
			if levels > 1 {
				return s.expandValue(r, doc, e, levels-1, false, budget)
			}
			return doc
		}
		for k, val := range x {
			x[k] = s.expandValue(r, val, e, levels, inLinks || k == "Links", budget)
		}
		return x
	case []any:
		for i, val := range x {
			x[i] = s.expandValue(r, val, e, levels, inLinks, budget)
		}
	}
	return v
}

// hyperlink reports whether an object is a navigation link: only an @odata.id.
func hyperlink(obj map[string]any) (string, bool) {
	if len(obj) != 1 {
		return "", false
	}
	id, ok := obj["@odata.id"].(string)
	return id, ok && strings.HasPrefix(id, redfish.RootURI+"/")
}

// fetchForExpand GETs one resource through the router with the caller's headers, so
// authentication and visibility are those of the request.
func (s *Server) fetchForExpand(r *http.Request, uri string, budget *int) (map[string]any, bool) {
	if *budget <= 0 {
		return nil, false
	}
	*budget--
	u, err := url.Parse(uri)
	if err != nil || u.RawQuery != "" {
		return nil, false
	}
	// A fresh chi routing context: the request's own one is already matched.
	ctx := context.WithValue(r.Context(), chi.RouteCtxKey, nil)
	sub, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Path, nil)
	if err != nil {
		return nil, false
	}
	sub.Header = r.Header.Clone()
	for _, h := range []string{"If-Match", "If-None-Match", "Content-Type", "Content-Length"} {
		sub.Header.Del(h)
	}
	sub.RemoteAddr, sub.TLS, sub.Host = r.RemoteAddr, r.TLS, r.Host
	buf := newBufferedResponse()
	s.router.ServeHTTP(buf, sub)
	if buf.status != http.StatusOK {
		return nil, false
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(buf.body.Bytes()))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	return doc, true
}
