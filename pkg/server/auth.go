package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

// credentialTTL bounds how long a verified Basic credential skips bcrypt.
const credentialTTL = 5 * time.Minute

// basicAuth checks Basic credentials. A credential verified once is remembered as an HMAC
// under a per-process random key for credentialTTL, so installers polling every second do not
// pay bcrypt on each request; only the HMAC is kept, never the password.
type basicAuth struct {
	users func() map[string]*config.User
	key   []byte

	mu       sync.RWMutex
	verified map[string]verifiedCred
}

type verifiedCred struct {
	mac     []byte
	hash    []byte // the bcrypt hash it was checked against: a rotated password invalidates it
	expires time.Time
}

// dummyHash makes a login for an unknown user cost one bcrypt too, so timing does not tell
// which usernames exist.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("kubevirt-redfish"), bcrypt.DefaultCost)

func newBasicAuth(users func() map[string]*config.User) *basicAuth {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	return &basicAuth{users: users, key: key, verified: map[string]verifiedCred{}}
}

func (a *basicAuth) mac(user, pass string) []byte {
	h := hmac.New(sha256.New, a.key)
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(pass))
	return h.Sum(nil)
}

// Check returns the user for a correct credential, or nil.
func (a *basicAuth) Check(user, pass string) *config.User {
	u := a.users()[user]
	if u == nil {
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
	a.mu.Lock()
	a.verified[user] = verifiedCred{mac: mac, hash: u.Hash, expires: time.Now().Add(credentialTTL)}
	a.mu.Unlock()
	return u
}

type ctxKey int

const userKey ctxKey = 0

func withUser(ctx context.Context, u *config.User) context.Context {
	return context.WithValue(ctx, userKey, u)
}

// userOf returns the authenticated user of a request (nil on public routes).
func userOf(ctx context.Context) *config.User {
	u, _ := ctx.Value(userKey).(*config.User)
	return u
}
