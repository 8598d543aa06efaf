// Package credentials keeps the users' passwords current without a restart. A password that
// comes from a file (passwordFile: typically a Secret or ConfigMap volume) is re-read every
// reload interval and applied when its content changed, which also catches the symlink swap
// kubelet makes when a volume's source changes. A password that comes from a Secret key
// (passwordSecret) is watched in the server's namespace and applied on every change. A
// missing file or key disables the user rather than keeping the old password.
//
// Each change yields a new configuration; the Apply callback hands it to the server, where
// the old password stops working at once (Basic auth's cache compares the hash, sessions the
// credential fingerprint).
package credentials

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/informer"
)

var secretResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Options configure a Reloader.
type Options struct {
	// Namespace holds the Secrets that passwordSecret names: the server's own namespace.
	Namespace string
	// Dyn reads those Secrets; without it passwordSecret users cannot log in.
	Dyn dynamic.Interface
	// Interval between checks of password files (default: the configuration's
	// reloadInterval).
	Interval time.Duration
	// Apply receives every new configuration.
	Apply func(*config.Config)
	Log   *zap.Logger
	// SyncTimeout bounds how long Start waits for the Secrets (default 30s).
	SyncTimeout time.Duration
}

// Reloader re-reads reloadable passwords and publishes configurations with the new hashes.
type Reloader struct {
	opts    Options
	key     []byte // HMAC key of the content digests: no plain hash of a password is kept
	trigger chan struct{}
	secrets map[string]cache.SharedIndexInformer // by Secret name

	mu      sync.Mutex
	cfg     *config.Config
	digests map[string]string // username -> HMAC of the content last applied ("" = missing)
}

// New prepares a reloader for cfg. Start runs it.
func New(cfg *config.Config, opts Options) *Reloader {
	if opts.Interval <= 0 {
		opts.Interval = cfg.ReloadInterval
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.Apply == nil {
		opts.Apply = func(*config.Config) {}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	r := &Reloader{opts: opts, key: key, trigger: make(chan struct{}, 1), secrets: map[string]cache.SharedIndexInformer{},
		cfg: cfg, digests: map[string]string{}}
	if opts.Dyn != nil {
		for _, u := range cfg.Users {
			if s := u.Source.Secret; s != nil && r.secrets[s.Name] == nil {
				r.secrets[s.Name] = r.secretInformer(s.Name)
			}
		}
	}
	return r
}

func (r *Reloader) secretInformer(name string) cache.SharedIndexInformer {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.opts.Dyn, 0, r.opts.Namespace, func(lo *metav1.ListOptions) {
		lo.FieldSelector = "metadata.name=" + name
	})
	inf := f.ForResource(secretResource).Informer()
	_ = inf.SetTransform(informer.Typed[corev1.Secret])
	kick := func(any) { r.Trigger() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick,
	})
	return inf
}

// Config is the current configuration.
func (r *Reloader) Config() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// Trigger asks for a check now.
func (r *Reloader) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Start reads the Secret-backed passwords, applies them, and keeps checking until ctx ends.
// The passwords read from files at load time are taken as current.
func (r *Reloader) Start(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, inf := range r.secrets {
		go inf.Run(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	wait, cancel := context.WithTimeout(ctx, r.opts.SyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), synced...) {
		if ctx.Err() != nil {
			return errors.New("credential secrets did not sync")
		}
		// Keep serving the other users; the informers keep trying and trigger a check
		// once the Secrets arrive.
		r.opts.Log.Error("the Secrets of passwordSecret users cannot be read yet: those users cannot log in until they are",
			zap.String("namespace", r.opts.Namespace))
	}
	r.mu.Lock()
	for name, u := range r.cfg.Users {
		if u.Source.File != "" && u.Hash != nil {
			if content, err := os.ReadFile(u.Source.File); err == nil {
				r.digests[name] = r.digest(content)
			}
		}
	}
	r.mu.Unlock()
	r.Check()
	go func() {
		t := time.NewTicker(r.opts.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.trigger:
			}
			r.Check()
		}
	}()
	return nil
}

func (r *Reloader) digest(content []byte) string {
	m := hmac.New(sha256.New, r.key)
	m.Write(content)
	return string(m.Sum(nil))
}

// read returns the content of a user's password source; ok is false when it is missing.
func (r *Reloader) read(src config.PasswordSource) ([]byte, bool) {
	if src.File != "" {
		b, err := os.ReadFile(src.File)
		return b, err == nil
	}
	inf := r.secrets[src.Secret.Name]
	if inf == nil {
		return nil, false
	}
	obj, ok, _ := inf.GetIndexer().GetByKey(r.opts.Namespace + "/" + src.Secret.Name)
	if !ok {
		return nil, false
	}
	v, ok := obj.(*corev1.Secret).Data[src.Secret.Key]
	return v, ok
}

// Check re-reads every reloadable password once and publishes a new configuration when any
// changed.
func (r *Reloader) Check() {
	cur := r.Config()
	names := make([]string, 0, len(cur.Users))
	for name, u := range cur.Users {
		if u.Source.Reloadable() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	changed := map[string]*config.User{}
	newDigests := map[string]string{}
	for _, name := range names {
		u := cur.Users[name]
		content, ok := r.read(u.Source)
		d := ""
		if ok {
			d = r.digest(content)
		}
		r.mu.Lock()
		old, seen := r.digests[name]
		r.mu.Unlock()
		if seen && old == d {
			continue
		}
		newDigests[name] = d
		if !ok {
			if u.Hash != nil {
				r.opts.Log.Warn("the password source of a user is gone: the user can no longer log in",
					zap.String("user", name), zap.String("source", describe(u.Source)))
			}
			changed[name] = u.WithCredential(nil, "")
			continue
		}
		hash, fp, err := config.Credential(name, content)
		if err != nil {
			r.opts.Log.Warn("the password of a user is unusable: the user can no longer log in",
				zap.String("user", name), zap.String("source", describe(u.Source)), zap.Error(err))
			changed[name] = u.WithCredential(nil, "")
			continue
		}
		if fp == u.Fingerprint && u.Hash != nil {
			continue // same password rewritten
		}
		changed[name] = u.WithCredential(hash, fp)
	}
	r.mu.Lock()
	for name, d := range newDigests {
		r.digests[name] = d
	}
	if len(changed) == 0 {
		r.mu.Unlock()
		return
	}
	users := make(map[string]*config.User, len(r.cfg.Users))
	for name, u := range r.cfg.Users {
		users[name] = u
	}
	var which []string
	for name, u := range changed {
		users[name] = u
		which = append(which, name)
	}
	sort.Strings(which)
	r.cfg = r.cfg.WithUsers(users)
	cfg := r.cfg
	r.mu.Unlock()
	r.opts.Log.Info("credentials reloaded", zap.Strings("users", which))
	r.opts.Apply(cfg)
}

func describe(src config.PasswordSource) string {
	if src.File != "" {
		return "file " + src.File
	}
	return "secret " + src.Secret.Name + " key " + src.Secret.Key
}
