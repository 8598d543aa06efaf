package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"hash"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
)

// credentialTTL bounds how long a verified Basic credential skips bcrypt.
const credentialTTL = 5 * time.Minute

// basicAuth checks Basic credentials. A credential verified once is remembered as an HMAC
// under a per-process random key for credentialTTL, so installers polling every second do not
// pay bcrypt on each request; only the HMAC is kept, never the password.
type basicAuth struct {
	users func() map[string]*config.User
	key   []byte
	// macs holds HMAC-SHA256 states keyed with key: keying one costs two SHA-256 blocks and
	// an allocation, which every request would pay otherwise.
	macs sync.Pool

	mu       sync.RWMutex
	verified map[string]verifiedCred
}

type verifiedCred struct {
	mac     []byte
	hash    []byte // the bcrypt hash it was checked against: a rotated password invalidates it
	expires time.Time
	at      time.Time // when bcrypt last verified it
}

// dummyHash makes a login for an unknown user cost one bcrypt too, so timing does not tell
// which usernames exist.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("kubevirt-redfish"), bcrypt.DefaultCost)

func newBasicAuth(users func() map[string]*config.User) *basicAuth {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	a := &basicAuth{users: users, key: key, verified: map[string]verifiedCred{}}
	a.macs.New = func() any { return hmac.New(sha256.New, key) }
	return a
}

func (a *basicAuth) mac(user, pass string) []byte {
	h := a.macs.Get().(hash.Hash)
	defer a.macs.Put(h)
	h.Reset()
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(pass))
	return h.Sum(nil)
}

// Check returns the user for a correct credential, or nil.
func (a *basicAuth) Check(user, pass string) *config.User {
	u := a.users()[user]
	if u == nil || u.Hash == nil {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(pass))
		return nil
	}
	mac := a.mac(user, pass)
	a.mu.RLock()
	v, ok := a.verified[user]
	a.mu.RUnlock()
	if ok && time.Now().Before(v.expires) && hmac.Equal(v.mac, mac) && string(v.hash) == string(u.Hash) {
		return u
	}
	if bcrypt.CompareHashAndPassword(u.Hash, []byte(pass)) != nil {
		return nil
	}
	now := time.Now()
	a.mu.Lock()
	a.verified[user] = verifiedCred{mac: mac, hash: u.Hash, expires: now.Add(credentialTTL), at: now}
	a.mu.Unlock()
	return u
}

// Known returns the user when this exact credential was verified by bcrypt within maxAge and
// the password has not changed since; it never runs bcrypt. A lockout of a client address
// lets such credentials through, so that an attack from a shared address (a NAT, a router)
// does not lock out the users who keep working from it.
func (a *basicAuth) Known(user, pass string, maxAge time.Duration) *config.User {
	u := a.users()[user]
	if u == nil || u.Hash == nil {
		return nil
	}
	a.mu.RLock()
	v, ok := a.verified[user]
	a.mu.RUnlock()
	if ok && time.Since(v.at) < maxAge && hmac.Equal(v.mac, a.mac(user, pass)) && string(v.hash) == string(u.Hash) {
		return u
	}
	return nil
}

// ctxKey types the context keys of this package.
type ctxKey int

// setUser records the authenticated user of the request ctx belongs to.
func setUser(ctx context.Context, u *config.User) {
	if info := infoOf(ctx); info != nil {
		info.user = u
	}
}

// userOf returns the authenticated user of a request (nil on public routes).
func userOf(ctx context.Context) *config.User {
	if info := infoOf(ctx); info != nil {
		return info.user
	}
	return nil
}

// recentCredential is how long a verified credential keeps working from a locked client
// address.
const recentCredential = time.Hour

// security is the server's authentication state beyond the configuration: the session
// store (nil without one) and the failed-login limiter.
type security struct {
	sessions *sessions.Store
	lock     *lockout
}

func newSecurity() *security { return &security{lock: newLockout(time.Now)} }

// SetConfig switches the server to a new configuration, as credential reloads produce. Old
// passwords stop working with the next request: the Basic cache compares the hash, sessions
// the credential fingerprint.
func (s *Server) SetConfig(cfg *config.Config) { s.cfg.Store(cfg) }

// authenticate returns the user of a request, or nil. An X-Auth-Token takes precedence over
// Basic credentials: an unknown or expired token fails even when Basic credentials are sent
// too, so that a client with a stale session logs in again.
func (s *Server) authenticate(r *http.Request) *config.User {
	var u *config.User
	method := "none"
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		method = "session"
		noteAuth(r.Context(), "session", "")
		u = s.tokenUser(r, tok)
	} else if user, pass, ok := r.BasicAuth(); ok {
		method = "basic"
		noteAuth(r.Context(), "basic", "")
		u = s.verify(r, user, pass)
	}
	if u == nil {
		s.metrics.AuthFailures.WithLabelValues(method).Inc()
		return nil
	}
	noteAuditUser(r.Context(), u.Username)
	return u
}

// tokenUser resolves a session token. The session must be live and its user still
// configured with the credential the session was opened with.
func (s *Server) tokenUser(r *http.Request, token string) *config.User {
	if s.sec.sessions == nil {
		return nil
	}
	users := s.cfg.Load().Users
	var u *config.User
	sess, ok := s.sec.sessions.Lookup(r.Context(), token, func(sess sessions.Session) bool {
		u = users[sess.User]
		return u != nil && u.Hash != nil && u.Fingerprint == sess.Credential
	})
	if !ok {
		return nil
	}
	noteAuth(r.Context(), "session", sess.ID)
	return u
}

// verify checks a username and password (Basic auth or a session login) under the
// failed-login limits. A locked (user, client) pair is refused without checking the
// password; from a locked client address only credentials that verified within
// recentCredential pass. Locked attempts answer exactly like a wrong password.
func (s *Server) verify(r *http.Request, user, pass string) *config.User {
	source := s.clientIP(r)
	limits := s.cfg.Load().Lockout
	switch s.sec.lock.check(user, source, limits) {
	case lockedPair:
		return nil
	case lockedPeer:
		return s.basic.Known(user, pass, recentCredential)
	}
	if u := s.basic.Check(user, pass); u != nil {
		s.sec.lock.succeed(user, source)
		return u
	}
	pairLocked, peerLocked := s.sec.lock.fail(user, source, limits)
	fields := []zap.Field{zap.String("user", truncate(user, 64)), zap.String("source", source),
		zap.String("request_id", requestID(r.Context()))}
	switch {
	case pairLocked:
		s.log.Warn("too many failed logins: this user is locked out from this address",
			append(fields, zap.Duration("for", limits.Duration))...)
	case peerLocked:
		s.log.Warn("too many failed logins from this address: only recently verified credentials are accepted from it",
			append(fields, zap.Duration("for", limits.Duration))...)
	default:
		s.log.Info("login failed", fields...)
	}
	return nil
}

// clientIP is the address of the client: the peer, or, when the peer is a trusted proxy, the
// rightmost X-Forwarded-For address that is not a trusted proxy.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	proxies := s.cfg.Load().TrustedProxies
	if ip == nil || !inNets(ip, proxies) {
		return host
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := net.ParseIP(strings.TrimSpace(hops[i]))
		if hop == nil {
			break
		}
		ip = hop
		if !inNets(hop, proxies) {
			break
		}
	}
	return ip.String()
}

func inNets(ip net.IP, nets []*net.IPNet) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
