package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

func mustHash(t testing.TB, pass string, cost int) []byte {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), cost)
	require.NoError(t, err)
	return h
}

// authFixture is a basicAuth over a user map the test controls.
type authFixture struct {
	mu    sync.Mutex
	users map[string]*config.User
	auth  *basicAuth
}

func newAuthFixture(t testing.TB, cost int) *authFixture {
	f := &authFixture{users: map[string]*config.User{
		"admin": {Username: "admin", Role: config.RoleAdministrator, Hash: mustHash(t, "secret", cost)},
		"ro":    {Username: "ro", Role: config.RoleReadOnly, Hash: mustHash(t, "look", cost)},
	}}
	f.auth = newBasicAuth(func() map[string]*config.User {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.users
	})
	return f
}

func (f *authFixture) cached(user string) (verifiedCred, bool) {
	f.auth.mu.RLock()
	defer f.auth.mu.RUnlock()
	v, ok := f.auth.verified[user]
	return v, ok
}

func TestBasicAuthCheck(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	tests := []struct {
		name, user, pass string
		want             string // "" for rejected
	}{
		{"correct", "admin", "secret", "admin"},
		{"correct read-only", "ro", "look", "ro"},
		{"wrong password", "admin", "Secret", ""},
		{"empty password", "admin", "", ""},
		{"other user's password", "ro", "secret", ""},
		{"unknown user", "mallory", "secret", ""},
		{"empty user", "", "", ""},
		{"username is case sensitive", "Admin", "secret", ""},
		{"password with trailing space", "admin", "secret ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := f.auth.Check(tc.user, tc.pass)
			if tc.want == "" {
				assert.Nil(t, u)
				return
			}
			require.NotNil(t, u)
			assert.Equal(t, tc.want, u.Username)
		})
	}
}

func TestBasicAuthCachesVerifiedCredential(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	_, ok := f.cached("admin")
	require.False(t, ok)

	assert.Nil(t, f.auth.Check("admin", "wrong"))
	_, ok = f.cached("admin")
	assert.False(t, ok, "a failed check caches nothing")

	require.NotNil(t, f.auth.Check("admin", "secret"))
	v, ok := f.cached("admin")
	require.True(t, ok, "a successful check is remembered")
	assert.Equal(t, f.users["admin"].Hash, v.hash)
	assert.WithinDuration(t, time.Now().Add(credentialTTL), v.expires, 5*time.Second)
	assert.NotContains(t, string(v.mac), "secret", "only an HMAC is kept")
	assert.Len(t, v.mac, 32)

	// Prove the second check does not run bcrypt: make the stored hash unusable for bcrypt
	// (in both the user and the cache entry, so the rotation guard still passes). A bcrypt
	// compare would now fail; the cached HMAC still recognises the credential.
	f.auth.mu.Lock()
	v.hash = []byte("not a bcrypt hash")
	f.auth.verified["admin"] = v
	f.auth.mu.Unlock()
	f.users["admin"].Hash = []byte("not a bcrypt hash")
	u := f.auth.Check("admin", "secret")
	require.NotNil(t, u, "the cached credential is accepted without bcrypt")
	assert.Equal(t, "admin", u.Username)
	// A wrong password does not match the HMAC and falls through to bcrypt, which fails.
	assert.Nil(t, f.auth.Check("admin", "guess"))
}

func TestBasicAuthRotationInvalidatesCache(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	require.NotNil(t, f.auth.Check("admin", "secret"))
	_, ok := f.cached("admin")
	require.True(t, ok)

	// Rotate the password (a config reload replaces the hash).
	f.mu.Lock()
	f.users = map[string]*config.User{
		"admin": {Username: "admin", Role: config.RoleAdministrator, Hash: mustHash(t, "new-secret", bcrypt.MinCost)},
		"ro":    f.users["ro"],
	}
	f.mu.Unlock()

	assert.Nil(t, f.auth.Check("admin", "secret"), "the old cached credential must fail after rotation")
	u := f.auth.Check("admin", "new-secret")
	require.NotNil(t, u)
	v, ok := f.cached("admin")
	require.True(t, ok)
	assert.Equal(t, f.users["admin"].Hash, v.hash, "the cache now refers to the new hash")
	assert.Nil(t, f.auth.Check("admin", "secret"))

	// Removing the user ends access at once, cache or not.
	f.mu.Lock()
	delete(f.users, "admin")
	f.mu.Unlock()
	assert.Nil(t, f.auth.Check("admin", "new-secret"))
}

func TestBasicAuthExpiredCacheReverifies(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	require.NotNil(t, f.auth.Check("admin", "secret"))
	f.auth.mu.Lock()
	v := f.auth.verified["admin"]
	v.expires = time.Now().Add(-time.Second)
	f.auth.verified["admin"] = v
	f.auth.mu.Unlock()

	require.NotNil(t, f.auth.Check("admin", "secret"), "an expired entry is verified again with bcrypt")
	v, _ = f.cached("admin")
	assert.True(t, v.expires.After(time.Now()), "and refreshed")

	// An expired entry is not trusted: with an unusable hash the check now fails.
	f.auth.mu.Lock()
	v.expires = time.Now().Add(-time.Second)
	v.hash = []byte("x")
	f.auth.verified["admin"] = v
	f.auth.mu.Unlock()
	f.users["admin"].Hash = []byte("x")
	assert.Nil(t, f.auth.Check("admin", "secret"))
}

func TestBasicAuthCacheIsPerUserAndPassword(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	require.NotNil(t, f.auth.Check("admin", "secret"))
	// The MAC binds user and password: another user with admin's password is not let in.
	assert.Nil(t, f.auth.Check("ro", "secret"))
	// user/pass boundaries cannot be shifted ("ad"+"minsecret" vs "admin"+"secret").
	assert.NotEqual(t, f.auth.mac("admin", "secret"), f.auth.mac("adminsecret", ""))
	assert.NotEqual(t, f.auth.mac("admin", "secret"), f.auth.mac("admi", "nsecret"))
	// Each process has its own key.
	other := newBasicAuth(func() map[string]*config.User { return nil })
	assert.NotEqual(t, f.auth.mac("admin", "secret"), other.mac("admin", "secret"))
}

// With a cost-12 hash one bcrypt compare takes a long time; 200 cached checks must cost less
// than a single compare, which proves they skip bcrypt.
func TestBasicAuthCachedChecksAreCheap(t *testing.T) {
	f := newAuthFixture(t, 12)
	start := time.Now()
	require.NotNil(t, f.auth.Check("admin", "secret"))
	one := time.Since(start)

	start = time.Now()
	for i := 0; i < 200; i++ {
		require.NotNil(t, f.auth.Check("admin", "secret"))
	}
	many := time.Since(start)
	assert.Less(t, many, one, "200 cached checks (%v) must cost less than one bcrypt compare (%v)", many, one)
}

func TestBasicAuthConcurrent(t *testing.T) {
	f := newAuthFixture(t, bcrypt.MinCost)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if i%2 == 0 {
					assert.NotNil(t, f.auth.Check("admin", "secret"))
				} else {
					assert.Nil(t, f.auth.Check("admin", "nope"))
				}
			}
		}(i)
	}
	wg.Wait()
}

func TestRequestContext(t *testing.T) {
	assert.Nil(t, userOf(context.Background()))
	assert.Empty(t, requestID(context.Background()))
	setUser(context.Background(), &config.User{}) // outside a request: nothing to record, no panic

	ctx := context.WithValue(context.Background(), infoKey, &requestInfo{id: "req-1"})
	assert.Nil(t, userOf(ctx), "not authenticated yet")
	u := &config.User{Username: "x"}
	setUser(ctx, u)
	assert.Same(t, u, userOf(ctx))
	assert.Same(t, u, userOf(context.WithValue(ctx, infoKey+1, "derived")), "contexts derived from the request's see its user")
	assert.Equal(t, "req-1", requestID(ctx))
}

func TestRequestIDs(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/redfish/v1", nil)
	a, b := newRequestID(r), newRequestID(r)
	assert.NotEqual(t, a, b, "every request has its own id")
	assert.Equal(t, requestIDPrefix, a[:len(requestIDPrefix)])

	r.Header.Set("X-Request-Id", "ironic-req-42")
	assert.Equal(t, "ironic-req-42", newRequestID(r), "the client's id, so both logs can be matched")
	r.Header.Set("X-Request-Id", strings.Repeat("x", 1000))
	assert.LessOrEqual(t, len(newRequestID(r)), maxRequestIDLen+len("..."))
}
