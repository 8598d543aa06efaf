package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	testingclock "k8s.io/utils/clock/testing"
)

var limits = config.Lockout{Threshold: 3, PeerThreshold: 5, Window: time.Minute, Duration: 2 * time.Minute}

func TestLockoutCounters(t *testing.T) {
	c := testingclock.NewFakeClock(time.Now())
	l := newLockout(c.Now)

	// Failures spread wider than the window never lock.
	for i := 0; i < 5; i++ {
		pair, _ := l.fail("alice", "192.0.2.1", limits)
		assert.False(t, pair)
		c.Step(40 * time.Second)
		if i%2 == 1 {
			c.Step(30 * time.Second)
		}
	}
	l = newLockout(c.Now)
	lim := limits
	lim.PeerThreshold = 10
	l.fail("alice", "192.0.2.1", lim)
	l.fail("alice", "192.0.2.1", lim)
	l.succeed("alice", "192.0.2.1")
	l.fail("alice", "192.0.2.1", lim)
	l.fail("alice", "192.0.2.1", lim)
	assert.Equal(t, unlocked, l.check("alice", "192.0.2.1", lim), "a success resets the pair")
	pair, _ := l.fail("alice", "192.0.2.1", lim)
	assert.True(t, pair, "the third failure within the window locks")
	assert.Equal(t, lockedPair, l.check("alice", "192.0.2.1", lim))
	assert.Equal(t, unlocked, l.check("alice", "192.0.2.2", lim), "other addresses are not affected")
	assert.Equal(t, unlocked, l.check("bob", "192.0.2.1", lim), "other users are not affected")
	assert.True(t, l.userLocked("alice"))
	assert.False(t, l.userLocked("bob"))
	c.Step(2*time.Minute + time.Second)
	assert.Equal(t, unlocked, l.check("alice", "192.0.2.1", limits), "locks end")
	assert.False(t, l.userLocked("alice"))

	// Spraying: one failure each for many users locks the address; a success does not wash
	// the address's count out.
	l = newLockout(c.Now)
	var peer bool
	for i := 0; i < 5; i++ {
		if i == 2 {
			l.succeed("valid", "198.51.100.9")
		}
		_, peer = l.fail(fmt.Sprintf("user%d", i), "198.51.100.9", limits)
	}
	assert.True(t, peer)
	assert.Equal(t, lockedPeer, l.check("anyone", "198.51.100.9", limits))
	assert.Equal(t, unlocked, l.check("anyone", "198.51.100.10", limits))

	// IPv6 clients are grouped by /64.
	l = newLockout(c.Now)
	for i := 0; i < 5; i++ {
		l.fail(fmt.Sprintf("u%d", i), fmt.Sprintf("2001:db8:1:2::%x", i+1), limits)
	}
	assert.Equal(t, lockedPeer, l.check("x", "2001:db8:1:2:ffff::1", limits))
	assert.Equal(t, unlocked, l.check("x", "2001:db8:1:3::1", limits))
}

func TestLockoutMemoryIsBounded(t *testing.T) {
	c := testingclock.NewFakeClock(time.Now())
	l := newLockout(c.Now)
	for i := 0; i < maxLockEntries+1000; i++ {
		l.fail(fmt.Sprintf("u%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), limits)
	}
	assert.LessOrEqual(t, len(l.pairs)+len(l.peers), maxLockEntries+2)
}

func TestClientIP(t *testing.T) {
	h := newSecHarness(t, func(f *config.File) { f.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.1"} })
	ip := func(remote string, xff ...string) string {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		for _, v := range xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		return h.server.clientIP(r)
	}
	assert.Equal(t, "203.0.113.5", ip("203.0.113.5:4000"))
	assert.Equal(t, "203.0.113.5", ip("203.0.113.5:4000", "198.51.100.1"), "XFF from an untrusted peer is ignored")
	assert.Equal(t, "198.51.100.1", ip("10.1.2.3:4000", "198.51.100.1"))
	assert.Equal(t, "198.51.100.1", ip("10.1.2.3:4000", "6.6.6.6, 198.51.100.1"), "the client cannot prepend its own claim")
	assert.Equal(t, "198.51.100.1", ip("10.1.2.3:4000", "6.6.6.6, 198.51.100.1, 10.9.9.9"), "proxy chains are walked")
	assert.Equal(t, "198.51.100.1", ip("192.0.2.1:4000", "6.6.6.6", "198.51.100.1"), "several headers count as one list")
	assert.Equal(t, "10.1.2.3", ip("10.1.2.3:4000"), "a trusted proxy without XFF is the client")
	assert.Equal(t, "10.1.2.3", ip("10.1.2.3:4000", "garbage"), "an unparsable hop stops the walk")
	assert.Equal(t, "2001:db8::1", ip("[2001:db8::1]:4000", "198.51.100.1"))
}

// TestLockoutIsolation drives the limiter over HTTP: a brute force or a spray from one
// address never blocks other users, other addresses, sessions, or users who keep working
// from the attacked address.
func TestLockoutIsolation(t *testing.T) {
	h := newSecHarness(t, func(f *config.File) {
		f.TrustedProxies = []string{"127.0.0.1"}
		f.Lockout = config.LockoutFile{Threshold: 3, PeerThreshold: 6, Window: "1m", Duration: "1m"}
	})
	const attacker, office, elsewhere = "203.0.113.66", "198.51.100.20", "192.0.2.30"
	get := func(c cred) int { return h.do(http.MethodGet, "/redfish/v1/Systems", c, "").code }

	// bob works from the office before anything happens.
	require.Equal(t, http.StatusOK, get(basic("bob").from(office)))
	bobTok, _ := h.login("bob", "bob-pw")

	// Brute force on alice from the attacker's address.
	wrongBody := h.do(http.MethodGet, "/redfish/v1/Systems", wrong("alice").from(attacker), "").body
	for i := 0; i < 2; i++ {
		require.Equal(t, http.StatusUnauthorized, get(wrong("alice").from(attacker)))
	}
	// Locked: even alice's right password fails from there, with the very same answer.
	locked := h.do(http.MethodGet, "/redfish/v1/Systems", basic("alice").from(attacker), "")
	assert.Equal(t, http.StatusUnauthorized, locked.code)
	assert.Equal(t, string(wrongBody), string(locked.body), "a lock looks like a wrong password")
	r := h.do(http.MethodPost, redfish.SessionsURI, cred{xff: attacker}, `{"UserName":"alice","Password":"alice-pw"}`)
	assert.Equal(t, http.StatusUnauthorized, r.code, "session login is limited too")
	// alice from anywhere else, and other users from the attacker's address, are fine.
	assert.Equal(t, http.StatusOK, get(basic("alice").from(elsewhere)))
	assert.Equal(t, http.StatusOK, get(basic("viewer").from(attacker)))
	// An Administrator sees the lock (on this replica).
	acct := h.do(http.MethodGet, redfish.AccountsURI+"/alice", basic("admin"), "")
	assert.Equal(t, true, acct.json["Locked"])

	// Password spraying from the office (a NAT shared with bob): after six failures, the
	// address is locked for credentials it has not seen verified recently...
	for i := 0; i < 6; i++ {
		get(cred{user: fmt.Sprintf("guess%d", i), pass: "Winter2026!"}.from(office))
	}
	assert.Equal(t, http.StatusUnauthorized, get(basic("tadmin").from(office)), "not verified recently: refused from the locked address")
	// ...but bob, who verified recently, keeps working from it, by Basic and by session,
	assert.Equal(t, http.StatusOK, get(basic("bob").from(office)))
	assert.Equal(t, http.StatusOK, get(withToken(bobTok).from(office)))
	// and tadmin works from any other address; tenant-b's installer is never blocked by
	// tenant-a's attacker.
	assert.Equal(t, http.StatusOK, get(basic("tadmin").from(elsewhere)))

	h.assertNoSecretsLogged("Winter2026!")
	// The lock was logged, with user and address but no password.
	var warned bool
	for _, e := range h.logs.FilterMessageSnippet("too many failed logins").All() {
		warned = true
		assert.NotEmpty(t, e.ContextMap()["source"])
	}
	assert.True(t, warned)
}
