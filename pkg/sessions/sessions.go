// Package sessions keeps Redfish login sessions in the cluster, as Secrets in the server's own
// namespace, so that a token works on every replica, survives restarts, and a logout or an
// expiry takes effect everywhere.
//
// A session Secret holds the user, the SHA-256 of the token (never the token), the creation
// time, the fingerprint of the credential it was opened with and the client address. Its
// annotation redfish.kubevirt.io/last-used is refreshed at most every Timeout/10 while the
// session is used, which is how idle expiry is known to every replica. Reads go through an
// informer indexed by token hash: authenticating a request costs no apiserver request.
package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/informer"
)

// Names of the session Secrets' labels, annotation, type and data keys.
const (
	// LabelSession marks session Secrets ("true"); the informer watches only these.
	LabelSession = "redfish.kubevirt.io/session"
	// LabelToken holds the first 128 bits of the token hash, for the rare lookup of a session
	// this replica's cache has not seen yet.
	LabelToken = "redfish.kubevirt.io/token-sha256"
	// AnnotationLastUsed is the RFC 3339 time the session was last used (within Timeout/10).
	AnnotationLastUsed = "redfish.kubevirt.io/last-used"
	// SecretType is the type of session Secrets.
	SecretType = "redfish.kubevirt.io/session"
	// NamePrefix starts the name of every session Secret; the session id follows.
	NamePrefix = "redfish-session-"

	keyUser       = "user"
	keyTokenHash  = "token-sha256"
	keyCreated    = "created"
	keyCredential = "credential"
	keyOrigin     = "origin"

	tokenIndex = "token"
)

// SecretResource is the Kubernetes resource sessions are stored as.
var SecretResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// ErrLimit means the user already holds Options.MaxPerUser sessions.
var ErrLimit = errors.New("session limit reached")

// ErrNotFound means there is no such (live) session.
var ErrNotFound = errors.New("session not found")

// Options configure a Store.
type Options struct {
	// Namespace holds the session Secrets: the server's own namespace.
	Namespace string
	// Timeout ends an idle session (default 30 minutes).
	Timeout time.Duration
	// MaxLifetime ends a session this long after login (0: no limit).
	MaxLifetime time.Duration
	// MaxPerUser bounds one user's live sessions (0: no limit).
	MaxPerUser int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	Log *zap.Logger
}

// Session is a live login session.
type Session struct {
	ID         string
	User       string
	Credential string // fingerprint of the credential the session was opened with
	Origin     string // client address at login
	Created    time.Time
	LastUsed   time.Time
}

// Store keeps sessions as Secrets and reads them from an informer cache.
type Store struct {
	dyn      dynamic.Interface
	opts     Options
	informer cache.SharedIndexInformer

	touchMu sync.Mutex
	touched map[string]time.Time // session id -> last-used time last written
	misses  bucket               // rate of apiserver lookups for tokens the cache does not know
}

// New prepares a store; Start runs it.
func New(dyn dynamic.Interface, opts Options) *Store {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, opts.Namespace, func(lo *metav1.ListOptions) {
		lo.LabelSelector = LabelSession + "=true"
	})
	inf := f.ForResource(SecretResource).Informer()
	_ = inf.SetTransform(informer.Typed[corev1.Secret])
	_ = inf.AddIndexers(cache.Indexers{tokenIndex: func(obj any) ([]string, error) {
		if sec, ok := obj.(*corev1.Secret); ok && len(sec.Data[keyTokenHash]) > 0 {
			return []string{string(sec.Data[keyTokenHash])}, nil
		}
		return nil, nil
	}})
	return &Store{dyn: dyn, opts: opts, informer: inf, touched: map[string]time.Time{}, misses: bucket{rate: 10, burst: 20, now: opts.Now}}
}

// Start runs the informer and the expiry sweeper until ctx ends; it returns once the cache has
// synced.
func (s *Store) Start(ctx context.Context) error {
	s.Run(ctx)
	return s.WaitSynced(ctx)
}

// Run starts the informer and the expiry sweeper until ctx ends, without waiting.
func (s *Store) Run(ctx context.Context) {
	go s.informer.Run(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
			s.sweep(ctx)
		}
	}()
}

// WaitSynced waits until the cache has synced, or wait ends. Until then, lookups go to the
// apiserver (at a bounded rate).
func (s *Store) WaitSynced(wait context.Context) error {
	if !cache.WaitForCacheSync(wait.Done(), s.informer.HasSynced) {
		return errors.New("the session cache did not sync: can the server list and watch Secrets in namespace " + s.opts.Namespace + "?")
	}
	return nil
}

// Synced reports whether the session cache has synced.
func (s *Store) Synced() bool { return s.informer.HasSynced() }

// Timeout is the idle timeout.
func (s *Store) Timeout() time.Duration { return s.opts.Timeout }

// Create opens a session for user and returns it with its token. The token is 256 random
// bits, hex-encoded; only its SHA-256 is stored. The session is in this replica's cache when
// Create returns.
func (s *Store) Create(ctx context.Context, user, credential, origin string) (Session, string, error) {
	if s.opts.MaxPerUser > 0 && len(s.List(user)) >= s.opts.MaxPerUser {
		return Session{}, "", ErrLimit
	}
	id, err := randomHex(16)
	if err != nil {
		return Session{}, "", err
	}
	token, err := randomHex(32)
	if err != nil {
		return Session{}, "", err
	}
	hash := tokenHash(token)
	now := s.opts.Now().UTC()
	b64 := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":        NamePrefix + id,
			"namespace":   s.opts.Namespace,
			"labels":      map[string]any{LabelSession: "true", LabelToken: hash[:32], "app.kubernetes.io/name": "kubevirt-redfish"},
			"annotations": map[string]any{AnnotationLastUsed: now.Format(time.RFC3339Nano)},
		},
		"type": SecretType,
		"data": map[string]any{
			keyUser:       b64(user),
			keyTokenHash:  b64(hash),
			keyCreated:    b64(now.Format(time.RFC3339Nano)),
			keyCredential: b64(credential),
			keyOrigin:     b64(origin),
		},
	}}
	if _, err := s.dyn.Resource(SecretResource).Namespace(s.opts.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return Session{}, "", fmt.Errorf("creating session secret: %w", err)
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := s.informer.GetIndexer().GetByKey(s.opts.Namespace + "/" + NamePrefix + id)
		return ok, nil
	})
	return Session{ID: id, User: user, Credential: credential, Origin: origin, Created: now, LastUsed: now}, token, nil
}

// Lookup returns the live session of a token, if valid (when given) accepts it. A token this
// replica's cache does not know yet (created on another replica a moment ago) is looked up in
// the apiserver, at a bounded rate. Using a session refreshes its last-used time, at most
// every Timeout/10, in the background.
func (s *Store) Lookup(ctx context.Context, token string, valid func(Session) bool) (Session, bool) {
	if token == "" || len(token) > 256 {
		return Session{}, false
	}
	hash := tokenHash(token)
	var found *corev1.Secret
	objs, _ := s.informer.GetIndexer().ByIndex(tokenIndex, hash)
	for _, o := range objs {
		if sec, ok := o.(*corev1.Secret); ok && subtle.ConstantTimeCompare(sec.Data[keyTokenHash], []byte(hash)) == 1 {
			found = sec
		}
	}
	if found == nil {
		found = s.lookupAPI(ctx, hash)
	}
	if found == nil {
		return Session{}, false
	}
	sess, ok := s.parse(found)
	if !ok || !s.live(sess) || (valid != nil && !valid(sess)) {
		return Session{}, false
	}
	s.touch(sess)
	return sess, true
}

// lookupAPI asks the apiserver for a session created too recently for the cache.
func (s *Store) lookupAPI(ctx context.Context, hash string) *corev1.Secret {
	if !s.misses.take() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := s.dyn.Resource(SecretResource).Namespace(s.opts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelSession + "=true," + LabelToken + "=" + hash[:32],
	})
	if err != nil {
		s.opts.Log.Warn("looking up a session in the apiserver", zap.Error(err))
		return nil
	}
	for i := range list.Items {
		obj, err := informer.Typed[corev1.Secret](&list.Items[i])
		if err != nil {
			continue
		}
		if sec := obj.(*corev1.Secret); subtle.ConstantTimeCompare(sec.Data[keyTokenHash], []byte(hash)) == 1 {
			return sec
		}
	}
	return nil
}

// Get returns a live session by id.
func (s *Store) Get(id string) (Session, bool) {
	obj, ok, _ := s.informer.GetIndexer().GetByKey(s.opts.Namespace + "/" + NamePrefix + id)
	if !ok {
		return Session{}, false
	}
	sess, ok := s.parse(obj.(*corev1.Secret))
	if !ok || !s.live(sess) {
		return Session{}, false
	}
	return sess, true
}

// Live counts the live sessions of every user.
func (s *Store) Live() int {
	n := 0
	for _, obj := range s.informer.GetIndexer().List() {
		if sess, ok := s.parse(obj.(*corev1.Secret)); ok && s.live(sess) {
			n++
		}
	}
	return n
}

// List returns the live sessions of user, oldest first.
func (s *Store) List(user string) []Session {
	var out []Session
	for _, obj := range s.informer.GetIndexer().List() {
		sess, ok := s.parse(obj.(*corev1.Secret))
		if ok && sess.User == user && s.live(sess) {
			out = append(out, sess)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Delete ends a session everywhere. It returns once this replica's cache no longer has it.
func (s *Store) Delete(ctx context.Context, id string) error {
	name := NamePrefix + id
	err := s.dyn.Resource(SecretResource).Namespace(s.opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting session secret: %w", err)
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := s.informer.GetIndexer().GetByKey(s.opts.Namespace + "/" + name)
		return !ok, nil
	})
	return nil
}

// live reports whether a session has neither been idle for Timeout nor outlived MaxLifetime.
func (s *Store) live(sess Session) bool {
	now := s.opts.Now()
	if !now.Before(sess.LastUsed.Add(s.opts.Timeout)) {
		return false
	}
	return s.opts.MaxLifetime <= 0 || now.Before(sess.Created.Add(s.opts.MaxLifetime))
}

// touch records that a session is in use, when its last-used time is older than Timeout/10.
// The patch runs in the background; the time of the last patch sent is remembered per
// session, so a cache that has not caught up yet causes no second patch.
func (s *Store) touch(sess Session) {
	now := s.opts.Now().UTC()
	every := s.opts.Timeout / 10
	if now.Sub(sess.LastUsed) < every {
		return
	}
	s.touchMu.Lock()
	if last, ok := s.touched[sess.ID]; ok && now.Sub(last) < every {
		s.touchMu.Unlock()
		return
	}
	s.touched[sess.ID] = now
	s.touchMu.Unlock()
	go func() {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{AnnotationLastUsed: now.Format(time.RFC3339Nano)}}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.dyn.Resource(SecretResource).Namespace(s.opts.Namespace).Patch(ctx, NamePrefix+sess.ID, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.opts.Log.Warn("refreshing a session's last use", zap.String("session", sess.ID), zap.Error(err))
			s.touchMu.Lock()
			delete(s.touched, sess.ID) // try again with the next request
			s.touchMu.Unlock()
		}
	}()
}

// sweep deletes expired session Secrets. Every replica sweeps; a delete carries the
// resourceVersion the expiry was judged on, so a session refreshed meanwhile survives.
func (s *Store) sweep(ctx context.Context) {
	period := s.opts.Timeout / 10
	if period > time.Minute {
		period = time.Minute
	}
	if period < time.Second {
		period = time.Second
	}
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) { s.SweepOnce(ctx) }, period, 0.5, true)
}

// SweepOnce deletes the expired sessions once.
func (s *Store) SweepOnce(ctx context.Context) {
	alive := map[string]bool{}
	for _, obj := range s.informer.GetIndexer().List() {
		sec := obj.(*corev1.Secret)
		sess, ok := s.parse(sec)
		if ok && s.live(sess) {
			alive[sess.ID] = true
			continue
		}
		rv := sec.ResourceVersion
		err := s.dyn.Resource(SecretResource).Namespace(s.opts.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			s.opts.Log.Warn("deleting an expired session", zap.String("session", sess.ID), zap.Error(err))
		}
	}
	s.touchMu.Lock()
	for id := range s.touched {
		if !alive[id] {
			delete(s.touched, id)
		}
	}
	s.touchMu.Unlock()
}

// parse reads a session Secret, counting a use this replica has seen but its cache has not yet:
// the last-used patch is asynchronous, and a session must not expire, or be swept, on the
// replica that just used it.
func (s *Store) parse(sec *corev1.Secret) (Session, bool) {
	sess, ok := parse(sec)
	if !ok {
		return sess, false
	}
	s.touchMu.Lock()
	if t, seen := s.touched[sess.ID]; seen && t.After(sess.LastUsed) {
		sess.LastUsed = t
	}
	s.touchMu.Unlock()
	return sess, true
}

// parse reads a session Secret; a Secret missing any field is no session.
func parse(sec *corev1.Secret) (Session, bool) {
	if len(sec.Name) <= len(NamePrefix) || sec.Name[:len(NamePrefix)] != NamePrefix {
		return Session{}, false
	}
	created, err := time.Parse(time.RFC3339Nano, string(sec.Data[keyCreated]))
	if err != nil || len(sec.Data[keyUser]) == 0 || len(sec.Data[keyTokenHash]) == 0 {
		return Session{}, false
	}
	sess := Session{
		ID:         sec.Name[len(NamePrefix):],
		User:       string(sec.Data[keyUser]),
		Credential: string(sec.Data[keyCredential]),
		Origin:     string(sec.Data[keyOrigin]),
		Created:    created,
		LastUsed:   created,
	}
	if t, err := time.Parse(time.RFC3339Nano, sec.Annotations[AnnotationLastUsed]); err == nil && t.After(sess.LastUsed) {
		sess.LastUsed = t
	}
	return sess, true
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// bucket is a small token bucket.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
	now         func() time.Time
}

func (b *bucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
