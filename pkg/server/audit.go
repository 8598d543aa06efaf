package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"
)

// auditInfo collects, while a request is served, what its audit line reports.
type auditInfo struct {
	user      string // the authenticated user
	auth      string // "basic", "session" or ""
	sessionID string // the session used, when auth is "session"
	loginUser string // the UserName of a session login, verified or not
}

type auditKey struct{}

func auditOf(ctx context.Context) *auditInfo {
	a, _ := ctx.Value(auditKey{}).(*auditInfo)
	return a
}

func noteAuth(ctx context.Context, how, sessionID string) {
	if a := auditOf(ctx); a != nil {
		a.auth = how
		if sessionID != "" {
			a.sessionID = sessionID
		}
	}
}

func noteAuditUser(ctx context.Context, user string) {
	if a := auditOf(ctx); a != nil {
		a.user = user
	}
}

func noteLoginUser(ctx context.Context, user string) {
	if a := auditOf(ctx); a != nil {
		a.loginUser = user
	}
}

// mutating are the methods that change something (PUT is never served, but an attempt is
// still worth a line).
var mutating = map[string]bool{http.MethodPost: true, http.MethodPatch: true, http.MethodDelete: true, http.MethodPut: true}

// audit writes one "audit" log line for every mutating request, whatever its outcome:
// request id, user, source address, system, action, parameters without secrets, status and
// the error's MessageId. Passwords, image credentials, tokens and URL query strings (which
// may carry signatures) never reach it.
func (s *Server) audit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !mutating[r.Method] {
			next.ServeHTTP(w, r)
			return
		}
		// Keep a copy of the body for the log; the handler still reads all of it.
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		}
		info := &auditInfo{}
		rec := &auditRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), auditKey{}, info)))

		route, system, sessionID := "", "", info.sessionID
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = rc.RoutePattern()
			id := rc.URLParam("id")
			switch {
			case strings.HasPrefix(route, "/redfish/v1/Systems/{id}"), strings.HasPrefix(route, "/redfish/v1/Managers/{id}"),
				strings.HasPrefix(route, "/redfish/v1/Chassis/{id}"):
				system = id
			case strings.HasPrefix(route, "/redfish/v1/SessionService/Sessions/{sid}"):
				sessionID = rc.URLParam("sid")
			}
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		action := actionOf(r.Method, route, r.URL.Path)
		fields := []zap.Field{
			zap.String("request_id", requestID(r.Context())),
			zap.String("user", info.user),
			zap.String("auth", info.auth),
			zap.String("source", s.clientIP(r)),
			zap.String("remote", r.RemoteAddr),
			zap.String("action", action),
			zap.String("method", r.Method),
			zap.String("path", r.URL.Path),
			zap.Int("status", status),
		}
		if system != "" {
			fields = append(fields, zap.String("system", system))
		}
		if sessionID != "" {
			fields = append(fields, zap.String("session", sessionID))
		}
		if info.loginUser != "" {
			fields = append(fields, zap.String("login_user", truncate(info.loginUser, 64)))
		}
		if p := auditParams(action, body); p != nil {
			fields = append(fields, zap.Any("params", p))
		}
		if status >= 400 {
			fields = append(fields, zap.String("result", "failure"), zap.String("error", errorCode(rec.head.Bytes())))
		} else {
			fields = append(fields, zap.String("result", "success"))
		}
		s.log.Info("audit", fields...)
	})
}

// actionOf names what a mutating request asks for.
func actionOf(method, route, path string) string {
	switch {
	case strings.HasSuffix(route, "/Actions/ComputerSystem.Reset"):
		return "ComputerSystem.Reset"
	case strings.HasSuffix(route, "/Actions/VirtualMedia.InsertMedia"):
		return "VirtualMedia.InsertMedia"
	case strings.HasSuffix(route, "/Actions/VirtualMedia.EjectMedia"):
		return "VirtualMedia.EjectMedia"
	case route == "/redfish/v1/Systems/{id}" && method == http.MethodPatch:
		return "ComputerSystem.Patch"
	case (route == "/redfish/v1/SessionService/Sessions" || route == "/redfish/v1/SessionService/Sessions/Members") && method == http.MethodPost:
		return "Session.Login"
	case route == "/redfish/v1/SessionService/Sessions/{sid}" && method == http.MethodDelete:
		return "Session.Logout"
	case route == "":
		return method + " (no such resource)"
	}
	return method + " " + route
}

// secretKeys are body properties never logged, whatever the action.
func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "password") || strings.Contains(k, "token") || strings.Contains(k, "secret") ||
		strings.Contains(k, "credential") || strings.Contains(k, "key")
}

// auditParams returns the request body fit for the log: secrets redacted, the image
// credentials of InsertMedia and the UserName of a login left out (the login user is logged
// as login_user), URL query strings cut, long strings shortened.
func auditParams(action string, body []byte) any {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if len(body) > maxBody {
		return map[string]any{"(body)": "too large"}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return map[string]any{"(body)": "not JSON"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return map[string]any{"(body)": "not a JSON object"}
	}
	switch action {
	case "VirtualMedia.InsertMedia", "Session.Login":
		if _, ok := obj["UserName"]; ok {
			obj["UserName"] = "(redacted)"
		}
	}
	return sanitize(obj, 0)
}

func sanitize(v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		if depth > 4 {
			return "(nested)"
		}
		out := make(map[string]any, len(x))
		for k, val := range x {
			if isSecretKey(k) {
				out[truncate(k, 64)] = "(redacted)"
				continue
			}
			out[truncate(k, 64)] = sanitize(val, depth+1)
		}
		return out
	case []any:
		if depth > 4 {
			return "(nested)"
		}
		out := make([]any, 0, len(x))
		for i, val := range x {
			if i == 16 {
				out = append(out, "(more)")
				break
			}
			out = append(out, sanitize(val, depth+1))
		}
		return out
	case string:
		return truncate(redactURL(x), 256)
	}
	return v
}

// redactURL keeps scheme, host and path of a URL and drops user info, query and fragment,
// which may hold credentials or signatures. Other strings are returned as they are.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	cut := u.User != nil || u.RawQuery != "" || u.Fragment != ""
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	if cut {
		return u.String() + "?(redacted)"
	}
	return u.String()
}

// errorCode extracts the MessageIds of an error envelope (its code when it has none).
func errorCode(body []byte) string {
	var env struct {
		Error struct {
			Code string `json:"code"`
			Info []struct {
				MessageID string `json:"MessageId"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	ids := make([]string, 0, len(env.Error.Info))
	for _, m := range env.Error.Info {
		ids = append(ids, m.MessageID)
	}
	if len(ids) == 0 {
		return env.Error.Code
	}
	return strings.Join(ids, ",")
}

// auditRecorder remembers the status and the start of the body.
type auditRecorder struct {
	http.ResponseWriter
	status int
	head   bytes.Buffer
}

func (a *auditRecorder) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if room := 16<<10 - a.head.Len(); room > 0 {
		a.head.Write(b[:min(room, len(b))])
	}
	return a.ResponseWriter.Write(b)
}

func (a *auditRecorder) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
