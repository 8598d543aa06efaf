package server

import (
	"net"
	"sync"
	"time"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

// lockState is what the failed-login limiter says about a login attempt.
type lockState int

const (
	unlocked lockState = iota
	// lockedPair: this username failed too often from this client address.
	lockedPair
	// lockedPeer: this client address failed too often, whatever the usernames (spraying).
	lockedPeer
)

// maxLockEntries bounds the limiter's memory; beyond it the oldest-looking entries go.
const maxLockEntries = 100_000

// lockout counts failed logins per (username, client address) and per client address. The
// counts live in the replica's memory: keeping attackers' failures in the cluster would turn
// an attack into apiserver writes. A lock never blocks other users: a pair lock concerns one
// username from one address, and an address lock still admits credentials that verified
// recently (basicAuth.Known). Session tokens are never subject to it.
type lockout struct {
	mu    sync.Mutex
	now   func() time.Time
	pairs map[pairKey]*failures
	peers map[string]*failures
}

type pairKey struct{ user, peer string }

type failures struct {
	n           int
	first       time.Time
	lockedUntil time.Time
}

func newLockout(now func() time.Time) *lockout {
	return &lockout{now: now, pairs: map[pairKey]*failures{}, peers: map[string]*failures{}}
}

// peerKey groups client addresses: IPv6 clients by /64, since one host commonly holds a whole
// /64; IPv4 clients by address.
func peerKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

func (l *lockout) check(user, peer string, c config.Lockout) lockState {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if f := l.pairs[pairKey{user, peerKey(peer)}]; f != nil && now.Before(f.lockedUntil) {
		return lockedPair
	}
	if f := l.peers[peerKey(peer)]; f != nil && now.Before(f.lockedUntil) {
		return lockedPeer
	}
	return unlocked
}

// fail records a failed login and says whether it locked the pair or the address.
func (l *lockout) fail(user, peer string, c config.Lockout) (pairLocked, peerLocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.pairs)+len(l.peers) >= maxLockEntries {
		l.prune(now, c)
	}
	pk := pairKey{user, peerKey(peer)}
	pf := l.pairs[pk]
	if pf == nil {
		pf = &failures{}
		l.pairs[pk] = pf
	}
	pairLocked = pf.add(now, c.Window, c.Duration, c.Threshold)
	ff := l.peers[pk.peer]
	if ff == nil {
		ff = &failures{}
		l.peers[pk.peer] = ff
	}
	peerLocked = ff.add(now, c.Window, c.Duration, c.PeerThreshold)
	return pairLocked, peerLocked
}

// add counts one failure and returns true when it reaches the threshold and locks.
func (f *failures) add(now time.Time, window, duration time.Duration, threshold int) bool {
	if f.n == 0 || now.Sub(f.first) > window {
		f.n, f.first = 0, now
	}
	f.n++
	if f.n >= threshold && !now.Before(f.lockedUntil) {
		f.lockedUntil = now.Add(duration)
		f.n, f.first = 0, now
		return true
	}
	return false
}

// succeed forgets the failures of a pair. The address's count stays: one good account must
// not wash out the failures of a spray.
func (l *lockout) succeed(user, peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pairs, pairKey{user, peerKey(peer)})
}

// userLocked reports whether the user is locked out from any address (ManagerAccount.Locked
// on this replica).
func (l *lockout) userLocked(user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for k, f := range l.pairs {
		if k.user == user && now.Before(f.lockedUntil) {
			return true
		}
	}
	return false
}

// prune drops entries that neither lock nor count any more, then, if still too many, an
// arbitrary half.
func (l *lockout) prune(now time.Time, c config.Lockout) {
	stale := func(f *failures) bool { return !now.Before(f.lockedUntil) && now.Sub(f.first) > c.Window }
	for k, f := range l.pairs {
		if stale(f) {
			delete(l.pairs, k)
		}
	}
	for k, f := range l.peers {
		if stale(f) {
			delete(l.peers, k)
		}
	}
	n := 0
	for k := range l.pairs {
		if n++; n%2 == 0 && len(l.pairs)+len(l.peers) >= maxLockEntries/2 {
			delete(l.pairs, k)
		}
	}
	for k := range l.peers {
		if n++; n%2 == 0 && len(l.pairs)+len(l.peers) >= maxLockEntries/2 {
			delete(l.peers, k)
		}
	}
}
