package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
)

// WithSessions offers session login (POST .../Sessions) with sessions kept in store. Without
// it the SessionService is disabled and clients use Basic authentication.
func WithSessions(store *sessions.Store) Option { return func(s *Server) { s.sec.sessions = store } }

// sessionServiceRefusal explains the 405 of a PATCH of the SessionService.
const sessionServiceRefusal = "The session timeout is set by the kubevirt-redfish configuration (sessions.timeout) and cannot be changed through Redfish."

func sessionURI(id string) string { return redfish.SessionsURI + "/" + id }

func sessionResource(sess sessions.Session) redfish.Session {
	return redfish.Session{
		ODataID:               sessionURI(sess.ID),
		ODataType:             redfish.TypeSession,
		Id:                    sess.ID,
		Name:                  "User Session",
		UserName:              sess.User,
		SessionType:           "Redfish",
		CreatedTime:           sess.Created.UTC().Format(time.RFC3339),
		ClientOriginIPAddress: sess.Origin,
	}
}

func (s *Server) sessionService(w http.ResponseWriter, r *http.Request) {
	timeout := int(s.cfg.Load().Sessions.Timeout / time.Second)
	if s.sec.sessions != nil {
		timeout = int(s.sec.sessions.Timeout() / time.Second)
	}
	writeJSON(w, http.StatusOK, redfish.SessionService{
		ODataID:        redfish.SessionServiceURI,
		ODataType:      redfish.TypeSessionService,
		Id:             "SessionService",
		Name:           "Session Service",
		ServiceEnabled: s.sec.sessions != nil,
		SessionTimeout: timeout,
		Status:         redfish.Status{State: "Enabled", Health: "OK"},
		Sessions:       redfish.Link{ODataID: redfish.SessionsURI},
	})
}

// sessions lists the caller's own sessions: every session of the same user, never another
// user's.
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	var uris []string
	if s.sec.sessions != nil {
		for _, sess := range s.sec.sessions.List(userOf(r.Context()).Username) {
			uris = append(uris, sessionURI(sess.ID))
		}
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(redfish.SessionsURI, redfish.TypeSessionColl, "Session Collection", uris))
}

// ownSession resolves {sid} to a session of the caller. Other users' sessions are 404, like
// sessions that do not exist.
func (s *Server) ownSession(w http.ResponseWriter, r *http.Request) (sessions.Session, bool) {
	id := chi.URLParam(r, "sid")
	if s.sec.sessions != nil {
		if sess, ok := s.sec.sessions.Get(id); ok && sess.User == userOf(r.Context()).Username {
			return sess, true
		}
	}
	writeError(w, redfish.ResourceNotFound("Session", id))
	return sessions.Session{}, false
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	if sess, ok := s.ownSession(w, r); ok {
		writeJSON(w, http.StatusOK, sessionResource(sess))
	}
}

// logout ends one of the caller's sessions, on every replica.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.ownSession(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.sec.sessions.Delete(ctx, sess.ID)
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		writeError(w, redfish.ResourceNotFound("Session", sess.ID))
	case err != nil:
		s.fail(w, r, err)
	default:
		noContent(w)
	}
}

// login opens a session: POST {"UserName", "Password"} to .../Sessions (or .../Members),
// without other credentials. It answers 201 with X-Auth-Token, Location and the Session.
// Wrong credentials, and logins refused by the lockout, are 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	user, pass, rerr := decodeLogin(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	noteLoginUser(r.Context(), user)
	u := s.verify(r, user, pass)
	if u == nil {
		s.metrics.AuthFailures.WithLabelValues("login").Inc()
		writeError(w, redfish.NoValidSession())
		return
	}
	noteAuditUser(r.Context(), u.Username)
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	sess, token, err := s.sec.sessions.Create(ctx, u.Username, u.Fingerprint, s.clientIP(r))
	if errors.Is(err, sessions.ErrLimit) {
		writeError(w, redfish.SessionLimitExceeded())
		return
	}
	if err != nil {
		s.log.Error("creating a session", zap.String("user", u.Username), zap.Error(err))
		writeError(w, redfish.ServiceTemporarilyUnavailable(5, "The session could not be stored."))
		return
	}
	noteAuth(r.Context(), "login", sess.ID)
	b, _ := json.Marshal(sessionResource(sess))
	h := w.Header()
	setCommonHeaders(h)
	// The response carries the token: nothing may store it.
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Auth-Token", token)
	h.Set("Location", sessionURI(sess.ID))
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
}

// decodeLogin validates a login body: exactly UserName and Password, both strings (OData
// annotations are ignored). Values never appear in errors.
func decodeLogin(body []byte) (string, string, *redfish.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", "", redfish.Merge([]*redfish.Error{redfish.PropertyMissing("UserName"), redfish.PropertyMissing("Password")})
	}
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return "", "", rerr
	}
	var errs []*redfish.Error
	var user, pass string
	for k, v := range obj {
		switch {
		case k == "UserName" || k == "Password":
			str, ok := v.(string)
			if !ok {
				errs = append(errs, redfish.PropertyValueTypeError(redfish.Redacted, k))
				continue
			}
			if k == "UserName" {
				user = str
			} else {
				pass = str
			}
		case isAnnotation(k):
		default:
			errs = append(errs, redfish.PropertyUnknown(k))
		}
	}
	for _, k := range []string{"UserName", "Password"} {
		if _, ok := obj[k]; !ok {
			errs = append(errs, redfish.PropertyMissing(k))
		}
	}
	if len(errs) > 0 {
		return "", "", redfish.Merge(errs)
	}
	return user, pass, nil
}

// loginMethods adds session login (POST) to a route's methods when a session store is
// configured.
func (s *Server) loginMethods(m map[string]http.HandlerFunc) map[string]http.HandlerFunc {
	out := map[string]http.HandlerFunc{}
	for k, v := range m {
		out[k] = v
	}
	if s.sec.sessions != nil {
		out[http.MethodPost] = s.login
	}
	return out
}
