package binary

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leading is the message a replica logs when it wins the Lease.
const leading = "leading: running background loops"

// Two replicas, as the Deployment runs them (one over plain HTTP, one over HTTPS with its
// self-signed certificate): both serve, exactly one holds the Lease, and when the leader gets
// SIGTERM the other takes over.
func TestBinaryTwoReplicas(t *testing.T) {
	c := startCluster(t)
	a := c.startServer(t, serverOpts{name: "http"})
	b := c.startServer(t, serverOpts{name: "https", https: true})
	a.waitStatus("/readyz", http.StatusOK, 2*time.Minute)
	figure(t, "replica http: start to /readyz 200", time.Since(a.started))
	eventually(t, 2*time.Minute, "the HTTPS replica to listen", func() bool { return b.Exited() || tcpOpen(b.addr) })
	leaf := b.trustServingCert()
	t.Logf("self-signed certificate: DNS %v, IP %v, not after %v", leaf.DNSNames, leaf.IPAddresses, leaf.NotAfter)
	b.waitStatus("/readyz", http.StatusOK, time.Minute)
	figure(t, "replica https: start to /readyz 200", time.Since(b.started))

	// Both serve every request (a Redfish client may land on either).
	for _, s := range []*server{a, b} {
		code, m := s.admin(http.MethodGet, "/redfish/v1/Systems/tenant-a.cp-0", "")
		assert.Equal(t, http.StatusOK, code, s.name)
		assert.Equal(t, "tenant-a.cp-0", m["Id"], s.name)
	}
	code, _ := b.admin(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	require.Equal(t, http.StatusNoContent, code)
	a.waitPower("tenant-a.cp-0", "On", 30*time.Second)

	// Exactly one leads. Both have been trying for several retry periods (2 s) by now.
	eventually(t, 30*time.Second, "a leader", func() bool {
		return len(a.logsWith(leading))+len(b.logsWith(leading)) > 0
	})
	time.Sleep(5 * time.Second)
	leaders := map[*server]string{}
	for _, s := range []*server{a, b} {
		if l := s.logsWith(leading); len(l) > 0 {
			leaders[s] = l[0].str("identity")
		}
	}
	require.Len(t, leaders, 1, "exactly one replica holds the Lease (identities: %v)", leaders)
	var leader, follower *server
	for s, id := range leaders {
		leader = s
		lease := c.lease(t)
		require.NotNil(t, lease)
		require.NotNil(t, lease.Spec.HolderIdentity)
		assert.Equal(t, id, *lease.Spec.HolderIdentity, "the Lease names the leader")
	}
	follower = a
	if leader == a {
		follower = b
	}
	t.Logf("leader: %s replica (%s)", leader.name, leaders[leader])

	// The leader goes away: the follower takes over, sooner than the 15 s lease duration since
	// the Lease is released at shutdown.
	require.NoError(t, leader.Cmd.Process.Signal(syscall.SIGTERM))
	signalled := time.Now()
	exit, err := leader.waitExit(shutdownGrace + 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, exit)
	figure(t, "leader SIGTERM to exit", leader.ExitedAt().Sub(signalled))
	took := eventually(t, 30*time.Second, "the follower to lead", func() bool { return len(follower.logsWith(leading)) > 0 })
	figure(t, "leader SIGTERM to follower leading", time.Since(signalled))
	assert.Less(t, took, 10*time.Second, "the follower need not wait for the Lease to expire")
	lease := c.lease(t)
	require.NotNil(t, lease)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.Equal(t, follower.logsWith(leading)[0].str("identity"), *lease.Spec.HolderIdentity)

	code, m := follower.admin(http.MethodGet, "/redfish/v1/Systems/tenant-a.cp-0", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "On", m["PowerState"])

	// Both logs are JSON throughout, client-go's leader election and net/http's TLS handshake
	// errors (the certificate fetch above hung up) included.
	for _, s := range []*server{a, b} {
		_, notJSON := s.logs()
		assert.Empty(t, notJSON, "%s: every log line is JSON", s.name)
	}
	handshake := false
	lines, _ := b.logs()
	for _, l := range lines {
		if l.str("logger") == "http" && strings.Contains(l.str("msg"), "TLS handshake error") {
			handshake = true
		}
	}
	assert.True(t, handshake, "net/http's errors reach the JSON log")
	clientGo := false
	linesA, _ := a.logs()
	for _, l := range append(lines, linesA...) {
		if strings.HasPrefix(l.str("logger"), "client-go") && strings.Contains(l.str("msg"), "lease") {
			clientGo = true
		}
	}
	assert.True(t, clientGo, "client-go's leader election messages reach the JSON log")
}

func tcpOpen(addr string) bool {
	conn, err := dialTimeout(addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
