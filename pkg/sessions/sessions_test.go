package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

const ns = "kubevirt-redfish"

func newCluster() dynamic.Interface {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{SecretResource: "SecretList"})
}

func startStore(t *testing.T, dyn dynamic.Interface, c *testingclock.FakeClock, mod func(*Options)) *Store {
	t.Helper()
	opts := Options{Namespace: ns, Timeout: 10 * time.Minute, MaxLifetime: time.Hour, MaxPerUser: 3, Now: c.Now}
	if mod != nil {
		mod(&opts)
	}
	s := New(dyn, opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, s.Start(ctx))
	return s
}

func newClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond, what)
}

func TestCreateStoresOnlyTheTokenHash(t *testing.T) {
	dyn, c := newCluster(), newClock()
	s := startStore(t, dyn, c, nil)
	sess, token, err := s.Create(context.Background(), "alice", "fp-1", "192.0.2.10")
	require.NoError(t, err)

	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), token, "256 random bits, hex")
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), sess.ID)
	assert.NotContains(t, token, sess.ID, "the id does not reveal the token")
	assert.Equal(t, "alice", sess.User)
	assert.Equal(t, c.Now(), sess.Created)

	u, err := dyn.Resource(SecretResource).Namespace(ns).Get(context.Background(), NamePrefix+sess.ID, metav1.GetOptions{})
	require.NoError(t, err)
	raw, err := json.Marshal(u.Object)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), token, "the token is never stored")
	sum := sha256.Sum256([]byte(token))
	assert.Contains(t, string(raw), hex.EncodeToString(sum[:16]), "the hash prefix labels the Secret")
	assert.Equal(t, "true", u.GetLabels()[LabelSession])
	assert.Equal(t, SecretType, u.Object["type"])

	got, ok := s.Lookup(context.Background(), token, nil)
	require.True(t, ok)
	assert.Equal(t, sess, got)
	_, ok = s.Lookup(context.Background(), token+"0", nil)
	assert.False(t, ok)
	_, ok = s.Lookup(context.Background(), strings.ToUpper(token), nil)
	assert.False(t, ok)
	_, ok = s.Lookup(context.Background(), "", nil)
	assert.False(t, ok)

	// Two logins never share a token or an id.
	sess2, token2, err := s.Create(context.Background(), "alice", "fp-1", "192.0.2.10")
	require.NoError(t, err)
	assert.NotEqual(t, token, token2)
	assert.NotEqual(t, sess.ID, sess2.ID)
}

func TestValidatorRejectsWithoutTouching(t *testing.T) {
	dyn, c := newCluster(), newClock()
	s := startStore(t, dyn, c, nil)
	_, token, err := s.Create(context.Background(), "alice", "fp-1", "")
	require.NoError(t, err)
	_, ok := s.Lookup(context.Background(), token, func(sess Session) bool { return sess.Credential == "fp-2" })
	assert.False(t, ok, "a session opened with an older credential is refused")
	_, ok = s.Lookup(context.Background(), token, func(sess Session) bool { return sess.Credential == "fp-1" })
	assert.True(t, ok)
}

func TestIdleExpiryAndRefreshAcrossReplicas(t *testing.T) {
	dyn, c := newCluster(), newClock()
	a := startStore(t, dyn, c, nil)
	b := startStore(t, dyn, c, nil)
	sess, token, err := a.Create(context.Background(), "alice", "fp", "")
	require.NoError(t, err)
	eventually(t, "replica b sees the session", func() bool { _, ok := b.Get(sess.ID); return ok })

	// Used within Timeout/10 of the last use: no refresh is written.
	c.Step(30 * time.Second)
	_, ok := b.Lookup(context.Background(), token, nil)
	require.True(t, ok)
	time.Sleep(50 * time.Millisecond)
	u, err := dyn.Resource(SecretResource).Namespace(ns).Get(context.Background(), NamePrefix+sess.ID, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, sess.Created.Format(time.RFC3339Nano), u.GetAnnotations()[AnnotationLastUsed])

	// Used later than Timeout/10: b refreshes last-used, and a sees it.
	c.Step(9 * time.Minute) // 9m30s after login
	_, ok = b.Lookup(context.Background(), token, nil)
	require.True(t, ok)
	want := c.Now()
	eventually(t, "replica a sees the refresh", func() bool {
		cur, ok := a.Get(sess.ID)
		return ok && cur.LastUsed.Equal(want)
	})

	// Idle for less than Timeout since the refresh: alive on both; then idle too long: dead.
	c.Step(9 * time.Minute)
	_, ok = a.Get(sess.ID)
	assert.True(t, ok, "the refresh kept it alive past the original timeout")
	c.Step(2 * time.Minute)
	_, ok = a.Lookup(context.Background(), token, nil)
	assert.False(t, ok, "idle for longer than the timeout")
	_, ok = b.Get(sess.ID)
	assert.False(t, ok)
	assert.Empty(t, a.List("alice"))

	// The sweep deletes it from the cluster.
	a.SweepOnce(context.Background())
	_, err = dyn.Resource(SecretResource).Namespace(ns).Get(context.Background(), NamePrefix+sess.ID, metav1.GetOptions{})
	assert.Error(t, err)
}

// The last-used patch is asynchronous and the cache lags the apiserver, so the replica that
// used a session must count that use itself: otherwise a session used just before its timeout
// expires, and can be swept, on that replica until its cache catches up.
func TestALocalUseCountsBeforeTheCacheSeesIt(t *testing.T) {
	dyn, c := newCluster(), newClock()
	patched := make(chan struct{}, 1)
	dyn.(*dynamicfake.FakeDynamicClient).PrependReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		patched <- struct{}{}
		return true, nil, nil // accepted, but never reaches the cache
	})
	s := startStore(t, dyn, c, func(o *Options) { o.Timeout = 5 * time.Minute })
	sess, token, err := s.Create(context.Background(), "alice", "fp", "")
	require.NoError(t, err)
	eventually(t, "the cache has the session", func() bool { _, ok := s.Get(sess.ID); return ok })

	c.Step(4 * time.Minute)
	_, ok := s.Lookup(context.Background(), token, nil)
	require.True(t, ok)
	<-patched
	c.Step(4 * time.Minute) // 8 minutes after login, 4 after the last use
	_, ok = s.Lookup(context.Background(), token, nil)
	assert.True(t, ok, "idle time counts from the last use on this replica")
	s.SweepOnce(context.Background())
	_, err = dyn.Resource(SecretResource).Namespace(ns).Get(context.Background(), NamePrefix+sess.ID, metav1.GetOptions{})
	assert.NoError(t, err, "the sweep keeps a session this replica just used")

	c.Step(5 * time.Minute)
	_, ok = s.Lookup(context.Background(), token, nil)
	assert.False(t, ok, "idle for the timeout since the last use")
}

func TestMaxLifetime(t *testing.T) {
	dyn, c := newCluster(), newClock()
	s := startStore(t, dyn, c, func(o *Options) { o.Timeout, o.MaxLifetime = 10*time.Minute, 25*time.Minute })
	_, token, err := s.Create(context.Background(), "alice", "fp", "")
	require.NoError(t, err)
	for i := 0; i < 4; i++ { // used every 6 minutes: never idle for long
		c.Step(6 * time.Minute)
		_, ok := s.Lookup(context.Background(), token, nil)
		require.True(t, ok, "use %d", i)
		eventually(t, "refresh", func() bool {
			ss := s.List("alice")
			return len(ss) == 1 && ss[0].LastUsed.Equal(c.Now())
		})
	}
	c.Step(2 * time.Minute) // 26 minutes after login
	_, ok := s.Lookup(context.Background(), token, nil)
	assert.False(t, ok, "past the maximum lifetime however active")
}

func TestListDeleteAndLimit(t *testing.T) {
	dyn, c := newCluster(), newClock()
	s := startStore(t, dyn, c, nil)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 3; i++ {
		sess, _, err := s.Create(ctx, "alice", "fp", "")
		require.NoError(t, err)
		ids = append(ids, sess.ID)
		c.Step(time.Second)
	}
	_, _, err := s.Create(ctx, "alice", "fp", "")
	assert.ErrorIs(t, err, ErrLimit)
	bob, bobToken, err := s.Create(ctx, "bob", "fp", "")
	require.NoError(t, err, "the limit is per user")

	var listed []string
	for _, sess := range s.List("alice") {
		listed = append(listed, sess.ID)
	}
	assert.Equal(t, ids, listed, "oldest first, only alice's")
	require.Len(t, s.List("bob"), 1)

	require.NoError(t, s.Delete(ctx, ids[0]))
	_, ok := s.Get(ids[0])
	assert.False(t, ok, "gone from the cache when Delete returns")
	assert.ErrorIs(t, s.Delete(ctx, ids[0]), ErrNotFound)
	_, _, err = s.Create(ctx, "alice", "fp", "")
	assert.NoError(t, err, "a logout frees a slot")

	require.NoError(t, s.Delete(ctx, bob.ID))
	_, ok = s.Lookup(ctx, bobToken, nil)
	assert.False(t, ok)
}

func TestLookupOfASessionTheCacheHasNotSeen(t *testing.T) {
	dyn, c := newCluster(), newClock()
	a := startStore(t, dyn, c, nil)
	_, token, err := a.Create(context.Background(), "alice", "fp", "")
	require.NoError(t, err)
	// A replica whose informer has not delivered the Secret yet (here: never started) asks
	// the apiserver.
	cold := New(dyn, Options{Namespace: ns, Timeout: 10 * time.Minute, Now: c.Now})
	sess, ok := cold.Lookup(context.Background(), token, nil)
	require.True(t, ok)
	assert.Equal(t, "alice", sess.User)
	_, ok = cold.Lookup(context.Background(), strings.Repeat("0", 64), nil)
	assert.False(t, ok)
	// The apiserver lookups are rate limited: a flood of made-up tokens cannot turn into a
	// flood of apiserver requests.
	asked := 0
	for i := 0; i < 100; i++ {
		if cold.misses.take() {
			asked++
		}
	}
	assert.LessOrEqual(t, asked, 20)
}

func TestForeignSecretsAreNoSessions(t *testing.T) {
	dyn, c := newCluster(), newClock()
	s := startStore(t, dyn, c, nil)
	// A Secret with the label but a foreign name or missing data grants nothing.
	for _, name := range []string{"other", NamePrefix + "abc"} {
		obj := map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{LabelSession: "true"}},
			"data":     map[string]any{"user": "YWRtaW4="}}
		_, err := dyn.Resource(SecretResource).Namespace(ns).Create(context.Background(), toUnstructured(obj), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, s.List("admin"))
	_, ok := s.Get("abc")
	assert.False(t, ok)
}

func toUnstructured(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}
