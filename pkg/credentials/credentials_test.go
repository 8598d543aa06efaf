package credentials

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

const ns = "kubevirt-redfish"

// volume mimics a Secret volume as kubelet writes it: files are symlinks through ..data,
// which is swapped atomically to a new timestamped directory on every update.
type volume struct {
	t   *testing.T
	dir string
	gen int
}

func newVolume(t *testing.T, files map[string]string) *volume {
	v := &volume{t: t, dir: t.TempDir()}
	v.update(files)
	for name := range files {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)))
	}
	return v
}

func (v *volume) path(name string) string { return filepath.Join(v.dir, name) }

func (v *volume) update(files map[string]string) {
	v.gen++
	ts := fmt.Sprintf("..2026_03_01_12_00_%02d.%d", v.gen, v.gen)
	require.NoError(v.t, os.Mkdir(filepath.Join(v.dir, ts), 0o755))
	for name, content := range files {
		require.NoError(v.t, os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o400))
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	require.NoError(v.t, os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")))
	require.NoError(v.t, os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")))
	if old != "" {
		require.NoError(v.t, os.RemoveAll(filepath.Join(v.dir, old)))
	}
}

// applied records the configurations a reloader publishes.
type applied struct {
	mu  sync.Mutex
	cfg *config.Config
	n   int
}

func (a *applied) apply(c *config.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg, a.n = c, a.n+1
}

func (a *applied) get() (*config.Config, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg, a.n
}

func ok(u *config.User, pass string) bool {
	return u != nil && u.Hash != nil && bcrypt.CompareHashAndPassword(u.Hash, []byte(pass)) == nil
}

func compile(t *testing.T, users ...config.UserFile) *config.Config {
	t.Helper()
	cfg, err := (&config.File{Allowlist: []config.EntryFile{{Namespace: "tenant-a"}}, Users: users, ReloadInterval: "100ms"}).Compile()
	require.NoError(t, err)
	return cfg
}

func TestFilePasswordRotation(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-pw"), bcrypt.MinCost)
	require.NoError(t, err)
	vol := newVolume(t, map[string]string{"alice": "first-pw\n", "bob": "bob-pw"})
	cfg := compile(t,
		config.UserFile{Username: "alice", PasswordFile: vol.path("alice"), Allow: []string{"*"}},
		config.UserFile{Username: "bob", PasswordFile: vol.path("bob"), Allow: []string{"*"}},
	)
	first := cfg.Users["alice"].Fingerprint
	require.True(t, ok(cfg.Users["alice"], "first-pw"), "trailing newline dropped")

	var a applied
	r := New(cfg, Options{Apply: a.apply})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.Start(ctx))
	time.Sleep(100 * time.Millisecond)
	_, n := a.get()
	assert.Zero(t, n, "nothing changed, nothing is published")

	// Plaintext rotation through a symlink swap.
	vol.update(map[string]string{"alice": "second-pw", "bob": "bob-pw"})
	require.Eventually(t, func() bool { c, _ := a.get(); return c != nil && ok(c.Users["alice"], "second-pw") }, 5*time.Second, 10*time.Millisecond)
	c, _ := a.get()
	assert.False(t, ok(c.Users["alice"], "first-pw"), "the old password stops working")
	assert.NotEqual(t, first, c.Users["alice"].Fingerprint, "the fingerprint follows the password")
	assert.Same(t, cfg.Users["bob"], c.Users["bob"], "unchanged users are kept as they are")
	assert.Same(t, c, r.Config())

	// A bcrypt hash in the file is used as is.
	vol.update(map[string]string{"alice": string(hash) + "\n", "bob": "bob-pw"})
	require.Eventually(t, func() bool { c, _ := a.get(); return ok(c.Users["alice"], "hashed-pw") }, 5*time.Second, 10*time.Millisecond)
	c, _ = a.get()
	assert.Equal(t, string(hash), string(c.Users["alice"].Hash))

	// The key disappears from the volume: alice is disabled, not left with the old password.
	vol.update(map[string]string{"bob": "bob-pw"})
	require.Eventually(t, func() bool { c, _ := a.get(); return c.Users["alice"].Hash == nil }, 5*time.Second, 10*time.Millisecond)
	c, _ = a.get()
	assert.Empty(t, c.Users["alice"].Fingerprint)
	assert.True(t, ok(c.Users["bob"], "bob-pw"))

	// An unusable password (too long for bcrypt) disables the user too.
	vol.update(map[string]string{"alice": string(make([]byte, 80)) + "x", "bob": "bob-pw"})
	time.Sleep(100 * time.Millisecond)
	c, _ = a.get()
	assert.Nil(t, c.Users["alice"].Hash)

	vol.update(map[string]string{"alice": "third-pw", "bob": "bob-pw"})
	require.Eventually(t, func() bool { c, _ := a.get(); return ok(c.Users["alice"], "third-pw") }, 5*time.Second, 10*time.Millisecond)
}

func TestFingerprintIsTheSameOnEveryReplica(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pw"), []byte("same-pw"), 0o600))
	u := config.UserFile{Username: "alice", PasswordFile: filepath.Join(dir, "pw"), Allow: []string{"*"}}
	a, b := compile(t, u), compile(t, u)
	assert.NotEqual(t, string(a.Users["alice"].Hash), string(b.Users["alice"].Hash), "bcrypt salts differ")
	assert.Equal(t, a.Users["alice"].Fingerprint, b.Users["alice"].Fingerprint, "fingerprints agree")
	assert.NotContains(t, a.Users["alice"].Fingerprint, "same-pw")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pw"), []byte("other-pw"), 0o600))
	assert.NotEqual(t, a.Users["alice"].Fingerprint, compile(t, u).Users["alice"].Fingerprint)
	u.Username = "bob"
	assert.NotEqual(t, a.Users["alice"].Fingerprint, compile(t, u).Users["bob"].Fingerprint, "salted per user")
}

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

func secret(name string, data map[string]string) *unstructured.Unstructured {
	d := map[string]any{}
	for k, v := range data {
		d[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns}, "data": d}}
}

func TestSecretPasswordRotation(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{secrets: "SecretList"}, secret("creds", map[string]string{"carol": "carol-pw"}))
	cfg := compile(t,
		config.UserFile{Username: "carol", PasswordSecret: &config.SecretKeyRef{Name: "creds", Key: "carol"}, Allow: []string{"*"}},
		config.UserFile{Username: "dave", PasswordSecret: &config.SecretKeyRef{Name: "missing", Key: "dave"}, Allow: []string{"*"}},
	)
	assert.Nil(t, cfg.Users["carol"].Hash, "nothing is read before Start")

	var a applied
	r := New(cfg, Options{Namespace: ns, Dyn: dyn, Apply: a.apply, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.Start(ctx))
	c, _ := a.get()
	require.NotNil(t, c, "Start applies the Secret passwords before returning")
	assert.True(t, ok(c.Users["carol"], "carol-pw"))
	assert.Nil(t, c.Users["dave"].Hash, "a missing Secret means no login")

	// Secret updates apply without waiting for the poll interval: the Secret is watched.
	update := func(dc dynamic.Interface, obj *unstructured.Unstructured) {
		_, err := dc.Resource(secrets).Namespace(ns).Update(context.Background(), obj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	update(dyn, secret("creds", map[string]string{"carol": "carol-pw-2"}))
	require.Eventually(t, func() bool { c, _ := a.get(); return ok(c.Users["carol"], "carol-pw-2") }, 5*time.Second, 10*time.Millisecond)
	c, _ = a.get()
	assert.False(t, ok(c.Users["carol"], "carol-pw"))

	_, err := dyn.Resource(secrets).Namespace(ns).Create(context.Background(), secret("missing", map[string]string{"dave": "dave-pw"}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { c, _ := a.get(); return ok(c.Users["dave"], "dave-pw") }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, dyn.Resource(secrets).Namespace(ns).Delete(context.Background(), "creds", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { c, _ := a.get(); return c.Users["carol"].Hash == nil }, 5*time.Second, 10*time.Millisecond)
}

func TestMain(m *testing.M) {
	config.PlaintextCost = bcrypt.MinCost
	os.Exit(m.Run())
}
