// Package config loads and validates the kubevirt-redfish YAML configuration: where to listen,
// which VMs are exposed (the allowlist) and who may use them.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Roles, as the Redfish AccountService names them.
const (
	RoleAdministrator = "Administrator"
	RoleOperator      = "Operator"
	RoleReadOnly      = "ReadOnly"
)

// File is the YAML document as written by the operator.
type File struct {
	Listen    string      `yaml:"listen"`
	TLS       TLSFile     `yaml:"tls"`
	LogLevel  string      `yaml:"logLevel"`
	Allowlist []EntryFile `yaml:"allowlist"`
	Users     []UserFile  `yaml:"users"`
	Media     MediaFile   `yaml:"media"`
	// Sessions tunes the Redfish SessionService (X-Auth-Token sessions).
	Sessions SessionsFile `yaml:"sessions"`
	// Lockout limits failed logins per user and client address, and per client address.
	Lockout LockoutFile `yaml:"lockout"`
	// TrustedProxies are the CIDRs of reverse proxies (an OpenShift router, an ingress
	// controller) whose X-Forwarded-For header names the real client. From any other peer
	// the header is ignored.
	TrustedProxies []string `yaml:"trustedProxies"`
	// ReloadInterval is how often password files and the TLS certificate and key are checked
	// for changes (default 5s).
	ReloadInterval string `yaml:"reloadInterval"`
}

// SessionsFile is the session configuration. Durations are Go durations such as "30m".
type SessionsFile struct {
	// Timeout ends a session after this much inactivity (SessionTimeout; default 30m,
	// between 30s and 24h).
	Timeout string `yaml:"timeout"`
	// MaxLifetime ends a session this long after login however active it is (default 24h;
	// "0" for no limit).
	MaxLifetime string `yaml:"maxLifetime"`
	// MaxPerUser bounds the sessions one user may hold at once (default 64).
	MaxPerUser int `yaml:"maxPerUser"`
}

// LockoutFile is the failed-login limiter.
type LockoutFile struct {
	// Threshold failed logins of one username from one client address lock that pair
	// (default 5).
	Threshold int `yaml:"threshold"`
	// PeerThreshold failed logins from one client address, whatever the usernames, lock the
	// address (default 20); credentials that verified recently keep working from it.
	PeerThreshold int `yaml:"peerThreshold"`
	// Window: failures older than this are forgotten (default 10m).
	Window string `yaml:"window"`
	// Duration of a lock (default 10m).
	Duration string `yaml:"duration"`
}

// MediaFile says how InsertMedia imports images: where they may come from and the storage of
// the DataVolumes, globally and per namespace.
type MediaFile struct {
	StorageFile `yaml:",inline"`
	// AllowedHosts limits image URLs to these host names ("*.example.com" matches
	// subdomains) and CIDRs; empty allows any host.
	AllowedHosts []string               `yaml:"allowedHosts"`
	Namespaces   map[string]StorageFile `yaml:"namespaces"`
	// Hotplug swaps media of running VMs at once through KubeVirt's declarative volume hotplug
	// (KubeVirt >= 1.6 with the DeclarativeHotplugVolumes feature gate); otherwise media
	// changes apply at the VM's next start.
	Hotplug bool `yaml:"hotplug"`
}

// StorageFile is the storage of imported images. Empty fields inherit.
type StorageFile struct {
	// Size of each image volume; empty means the image's Content-Length plus room for CDI's
	// filesystem overhead.
	Size         string   `yaml:"size"`
	StorageClass string   `yaml:"storageClass"`
	AccessModes  []string `yaml:"accessModes"`
	VolumeMode   string   `yaml:"volumeMode"`
	// CAConfigMap names a ConfigMap (in the VM's namespace) with the CA bundle CDI uses for
	// HTTPS images.
	CAConfigMap string `yaml:"caConfigMap"`
	// InsecureTLS trusts whatever certificate an HTTPS image server presents: InsertMedia
	// reads it without verification and CDI's import is given exactly that certificate to
	// trust (CDI has no switch to skip verification of HTTP sources). Only for image servers
	// with self-signed certificates on a trusted network. It replaces an inherited caConfigMap.
	InsecureTLS bool `yaml:"insecureTLS"`
}

// TLSFile names the serving certificate, re-read when the files change. With neither file
// the server generates a self-signed certificate at start; plain HTTP needs InsecureHTTP.
type TLSFile struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// InsecureHTTP serves plain HTTP: only behind a proxy that terminates TLS (an OpenShift
	// Route with edge termination) or for a local demo.
	InsecureHTTP bool `yaml:"insecureHTTP"`
	// SelfSignedNames are extra DNS names and IP addresses of the generated certificate.
	SelfSignedNames []string `yaml:"selfSignedNames"`
}

// EntryFile is one allowlist entry: a namespace, optionally narrowed by a label selector and
// VM name globs.
type EntryFile struct {
	Name      string   `yaml:"name"`
	Namespace string   `yaml:"namespace"`
	Selector  string   `yaml:"selector"`
	VMs       []string `yaml:"vms"`
}

// UserFile is one account. Exactly one of PasswordHash, PasswordFile, PasswordEnv and
// PasswordSecret is set. A file or Secret key holds a plaintext password or a bcrypt hash,
// and is re-read when it changes.
type UserFile struct {
	Username       string        `yaml:"username"`
	Role           string        `yaml:"role"`
	PasswordHash   string        `yaml:"passwordHash"`
	PasswordFile   string        `yaml:"passwordFile"`
	PasswordEnv    string        `yaml:"passwordEnv"`
	PasswordSecret *SecretKeyRef `yaml:"passwordSecret"`
	Allow          []string      `yaml:"allow"`
}

// SecretKeyRef names one key of a Secret in the server's own namespace.
type SecretKeyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

// Config is the validated, compiled configuration.
type Config struct {
	Listen    string
	TLS       TLSFile
	LogLevel  string
	Allowlist []*Entry
	Users     map[string]*User
	Media     Media
	Sessions  Sessions
	Lockout   Lockout
	// TrustedProxies are the compiled trustedProxies.
	TrustedProxies []*net.IPNet
	ReloadInterval time.Duration
}

// Sessions is the compiled SessionsFile.
type Sessions struct {
	Timeout     time.Duration
	MaxLifetime time.Duration // 0: no limit
	MaxPerUser  int
}

// Lockout is the compiled LockoutFile.
type Lockout struct {
	Threshold     int
	PeerThreshold int
	Window        time.Duration
	Duration      time.Duration
}

// Media is the compiled media configuration.
type Media struct {
	Default      Storage
	Namespaces   map[string]Storage
	AllowedHosts []string
	AllowedNets  []*net.IPNet
	Hotplug      bool
}

// Storage is compiled StorageFile.
type Storage struct {
	Size         *resource.Quantity
	StorageClass string
	AccessModes  []corev1.PersistentVolumeAccessMode
	VolumeMode   *corev1.PersistentVolumeMode
	CAConfigMap  string
	InsecureTLS  bool
}

// StorageFor returns the media storage of a namespace.
func (m Media) StorageFor(ns string) Storage {
	if s, ok := m.Namespaces[ns]; ok {
		return s
	}
	return m.Default
}

// Entry is a compiled allowlist entry.
type Entry struct {
	Name      string
	Namespace string
	Selector  labels.Selector
	VMs       []string
}

// User is a compiled account.
type User struct {
	Username string
	Role     string
	// Hash is a bcrypt hash; plaintext passwords are hashed when loaded. Nil while a
	// passwordSecret has not been read: nobody can log in as the user.
	Hash    []byte
	Entries []*Entry
	// Fingerprint identifies the credential's current value, the same on every replica,
	// without revealing it: sessions record it, and a session outlives no password change.
	Fingerprint string
	// Source is where a reloadable password comes from.
	Source PasswordSource
}

// PasswordSource is where a user's password is re-read from: a file or a Secret key.
type PasswordSource struct {
	File   string
	Secret *SecretKeyRef
}

// Reloadable reports whether the password can change without a restart.
func (p PasswordSource) Reloadable() bool { return p.File != "" || p.Secret != nil }

// WithCredential returns a copy of u with a new password hash and fingerprint.
func (u *User) WithCredential(hash []byte, fingerprint string) *User {
	c := *u
	c.Hash, c.Fingerprint = hash, fingerprint
	return &c
}

// WithUsers returns a copy of c whose users are replaced, for credential reloads.
func (c *Config) WithUsers(users map[string]*User) *Config {
	n := *c
	n.Users = users
	return &n
}

// Matches reports whether the VM ns/name with the given labels falls under the entry.
func (e *Entry) Matches(ns, name string, lbls map[string]string) bool {
	if ns != e.Namespace {
		return false
	}
	if e.Selector != nil && !e.Selector.Matches(labels.Set(lbls)) {
		return false
	}
	if len(e.VMs) == 0 {
		return true
	}
	for _, g := range e.VMs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// MaySee reports whether the user may see and use VM ns/name.
func (u *User) MaySee(ns, name string, lbls map[string]string) bool {
	for _, e := range u.Entries {
		if e.Matches(ns, name, lbls) {
			return true
		}
	}
	return false
}

// MayWrite reports whether the user's role allows power, boot and media changes.
func (u *User) MayWrite() bool { return u.Role == RoleAdministrator || u.Role == RoleOperator }

// Namespaces returns the namespaces the allowlist names, without duplicates, in order.
func (c *Config) Namespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range c.Allowlist {
		if !seen[e.Namespace] {
			seen[e.Namespace] = true
			out = append(out, e.Namespace)
		}
	}
	return out
}

// Exposed reports whether any allowlist entry exposes VM ns/name.
func (c *Config) Exposed(ns, name string, lbls map[string]string) bool {
	for _, e := range c.Allowlist {
		if e.Matches(ns, name, lbls) {
			return true
		}
	}
	return false
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse validates a YAML document. Every error names the key at fault.
func Parse(data []byte) (*Config, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return f.Compile()
}

// Compile validates f and turns it into a Config, reporting every problem found.
func (f *File) Compile() (*Config, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	c := &Config{Listen: f.Listen, TLS: f.TLS, LogLevel: f.LogLevel, Users: map[string]*User{}}
	errs = compileSecurity(f, c, errs)
	if c.Listen == "" {
		c.Listen = "0.0.0.0:8443"
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("logLevel", "must be one of debug, info, warn, error, not %q", c.LogLevel)
	}
	if (f.TLS.CertFile == "") != (f.TLS.KeyFile == "") {
		bad("tls", "certFile and keyFile must be given together")
	}

	entries := map[string]*Entry{}
	for i, ef := range f.Allowlist {
		key := fmt.Sprintf("allowlist[%d]", i)
		e := &Entry{Name: ef.Name, Namespace: ef.Namespace, VMs: ef.VMs}
		if e.Name == "" {
			e.Name = ef.Namespace
		}
		if entries[e.Name] != nil {
			bad(key+".name", "%q is used by another entry", e.Name)
		}
		if msgs := validation.IsDNS1123Label(ef.Namespace); len(msgs) > 0 {
			bad(key+".namespace", "%q is not a namespace name: %s", ef.Namespace, strings.Join(msgs, "; "))
		}
		if ef.Selector != "" {
			sel, err := labels.Parse(ef.Selector)
			if err != nil {
				bad(key+".selector", "%v", err)
			}
			e.Selector = sel
		}
		for j, g := range ef.VMs {
			if _, err := path.Match(g, ""); err != nil {
				bad(fmt.Sprintf("%s.vms[%d]", key, j), "%q is not a valid glob", g)
			}
		}
		entries[e.Name] = e
		c.Allowlist = append(c.Allowlist, e)
	}
	if len(c.Allowlist) == 0 {
		bad("allowlist", "must name at least one namespace")
	}

	for i, uf := range f.Users {
		key := fmt.Sprintf("users[%d]", i)
		u, uerrs := compileUser(key, uf, entries)
		errs = append(errs, uerrs...)
		if u == nil {
			continue
		}
		if c.Users[u.Username] != nil {
			bad(key+".username", "%q is defined twice", u.Username)
		}
		c.Users[u.Username] = u
	}
	if len(f.Users) == 0 {
		bad("users", "must define at least one user")
	}
	c.Media, errs = compileMedia(f.Media, errs)
	if len(errs) > 0 {
		return nil, fmt.Errorf("config is invalid:\n  %w", joinLines(errs))
	}
	return c, nil
}

// compileSecurity compiles sessions, lockout, trustedProxies and reloadInterval.
func compileSecurity(f *File, c *Config, errs []error) []error {
	dur := func(key, v string, def, min, max time.Duration) time.Duration {
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < min || (max > 0 && d > max) {
			if max > 0 {
				errs = append(errs, fmt.Errorf("%s: %q must be a duration between %v and %v, such as 30m", key, v, min, max))
			} else {
				errs = append(errs, fmt.Errorf("%s: %q must be a duration of at least %v, such as 30m", key, v, min))
			}
			return def
		}
		return d
	}
	positive := func(key string, v, def int) int {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, not %d", key, v))
		}
		if v <= 0 {
			return def
		}
		return v
	}
	c.Sessions = Sessions{
		Timeout:     dur("sessions.timeout", f.Sessions.Timeout, 30*time.Minute, 30*time.Second, 24*time.Hour),
		MaxLifetime: dur("sessions.maxLifetime", f.Sessions.MaxLifetime, 24*time.Hour, 0, 0),
		MaxPerUser:  positive("sessions.maxPerUser", f.Sessions.MaxPerUser, 64),
	}
	if c.Sessions.MaxLifetime > 0 && c.Sessions.MaxLifetime < c.Sessions.Timeout {
		errs = append(errs, fmt.Errorf("sessions.maxLifetime: %v is shorter than sessions.timeout %v", c.Sessions.MaxLifetime, c.Sessions.Timeout))
	}
	c.Lockout = Lockout{
		Threshold:     positive("lockout.threshold", f.Lockout.Threshold, 5),
		PeerThreshold: positive("lockout.peerThreshold", f.Lockout.PeerThreshold, 20),
		Window:        dur("lockout.window", f.Lockout.Window, 10*time.Minute, time.Second, 24*time.Hour),
		Duration:      dur("lockout.duration", f.Lockout.Duration, 10*time.Minute, time.Second, 24*time.Hour),
	}
	for i, p := range f.TrustedProxies {
		if !strings.Contains(p, "/") {
			if ip := net.ParseIP(p); ip != nil {
				bits := 8 * len(ip.To16())
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				c.TrustedProxies = append(c.TrustedProxies, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
				continue
			}
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("trustedProxies[%d]: %q is not an IP address or CIDR", i, p))
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}
	c.ReloadInterval = dur("reloadInterval", f.ReloadInterval, 5*time.Second, 100*time.Millisecond, time.Hour)
	if f.TLS.InsecureHTTP && f.TLS.CertFile != "" {
		errs = append(errs, errors.New("tls: insecureHTTP and certFile exclude each other"))
	}
	return errs
}

func compileMedia(mf MediaFile, errs []error) (Media, []error) {
	m := Media{Namespaces: map[string]Storage{}, Hotplug: mf.Hotplug}
	m.Default, errs = compileStorage("media", mf.StorageFile, Storage{}, errs)
	for ns, sf := range mf.Namespaces {
		m.Namespaces[ns], errs = compileStorage("media.namespaces."+ns, sf, m.Default, errs)
	}
	for i, h := range mf.AllowedHosts {
		if strings.Contains(h, "/") {
			_, n, err := net.ParseCIDR(h)
			if err != nil {
				errs = append(errs, fmt.Errorf("media.allowedHosts[%d]: %q is not a CIDR", i, h))
				continue
			}
			m.AllowedNets = append(m.AllowedNets, n)
			continue
		}
		if h == "" || strings.ContainsAny(h, ":/ ") {
			errs = append(errs, fmt.Errorf("media.allowedHosts[%d]: %q is not a host name or CIDR", i, h))
			continue
		}
		m.AllowedHosts = append(m.AllowedHosts, strings.ToLower(h))
	}
	return m, errs
}

func compileStorage(key string, sf StorageFile, base Storage, errs []error) (Storage, []error) {
	s := base
	if sf.Size != "" {
		q, err := resource.ParseQuantity(sf.Size)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("%s.size: %q is not a positive quantity such as 8Gi", key, sf.Size))
		} else {
			s.Size = &q
		}
	}
	if sf.StorageClass != "" {
		s.StorageClass = sf.StorageClass
	}
	if len(sf.AccessModes) > 0 {
		s.AccessModes = nil
		for i, a := range sf.AccessModes {
			switch mode := corev1.PersistentVolumeAccessMode(a); mode {
			case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod:
				s.AccessModes = append(s.AccessModes, mode)
			default:
				errs = append(errs, fmt.Errorf("%s.accessModes[%d]: %q is not an access mode", key, i, a))
			}
		}
	}
	switch mode := corev1.PersistentVolumeMode(sf.VolumeMode); mode {
	case "":
	case corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock:
		s.VolumeMode = &mode
	default:
		errs = append(errs, fmt.Errorf("%s.volumeMode: %q must be Filesystem or Block", key, sf.VolumeMode))
	}
	switch {
	case sf.CAConfigMap != "" && sf.InsecureTLS:
		errs = append(errs, fmt.Errorf("%s.insecureTLS: cannot be combined with caConfigMap: trust a CA bundle or the presented certificate, not both", key))
	case sf.CAConfigMap != "":
		s.CAConfigMap, s.InsecureTLS = sf.CAConfigMap, false
	case sf.InsecureTLS:
		s.CAConfigMap, s.InsecureTLS = "", true
	}
	return s, errs
}

func compileUser(key string, uf UserFile, entries map[string]*Entry) (*User, []error) {
	var errs []error
	bad := func(k, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", key, k, fmt.Sprintf(format, args...)))
	}
	u := &User{Username: uf.Username, Role: uf.Role}
	if u.Username == "" || strings.ContainsAny(u.Username, ":\n") {
		bad("username", "must be non-empty and contain no ':'")
	}
	if u.Role == "" {
		u.Role = RoleAdministrator
	}
	switch u.Role {
	case RoleAdministrator, RoleOperator, RoleReadOnly:
	default:
		bad("role", "must be Administrator, Operator or ReadOnly, not %q", u.Role)
	}
	hash, fp, err := passwordHash(uf)
	if err != nil {
		bad("password", "%v", err)
	}
	u.Hash, u.Fingerprint = hash, fp
	u.Source = PasswordSource{File: uf.PasswordFile, Secret: uf.PasswordSecret}
	if uf.PasswordSecret != nil && (uf.PasswordSecret.Name == "" || uf.PasswordSecret.Key == "") {
		bad("passwordSecret", "name and key are required")
	}
	for j, name := range uf.Allow {
		if name == "*" {
			for _, e := range entries {
				u.Entries = append(u.Entries, e)
			}
			continue
		}
		e := entries[name]
		if e == nil {
			bad(fmt.Sprintf("allow[%d]", j), "no allowlist entry is named %q", name)
			continue
		}
		u.Entries = append(u.Entries, e)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return u, nil
}

// passwordHash returns the bcrypt hash and fingerprint of a user's password, hashing a
// plaintext password from a file or the environment so that only the hash stays in memory.
// A passwordSecret is read later, from the cluster: it yields no hash here.
func passwordHash(uf UserFile) ([]byte, string, error) {
	set := 0
	for _, s := range []string{uf.PasswordHash, uf.PasswordFile, uf.PasswordEnv} {
		if s != "" {
			set++
		}
	}
	if uf.PasswordSecret != nil {
		set++
	}
	if set != 1 {
		return nil, "", errors.New("exactly one of passwordHash, passwordFile, passwordEnv and passwordSecret must be set")
	}
	switch {
	case uf.PasswordSecret != nil:
		return nil, "", nil
	case uf.PasswordHash != "":
		if _, err := bcrypt.Cost([]byte(uf.PasswordHash)); err != nil {
			return nil, "", fmt.Errorf("passwordHash is not a bcrypt hash: %v", err)
		}
		return []byte(uf.PasswordHash), hashFingerprint(uf.Username, []byte(uf.PasswordHash)), nil
	case uf.PasswordFile != "":
		data, err := os.ReadFile(uf.PasswordFile)
		if err != nil {
			return nil, "", fmt.Errorf("passwordFile: %v", err)
		}
		return Credential(uf.Username, data)
	}
	v, ok := os.LookupEnv(uf.PasswordEnv)
	if !ok {
		return nil, "", fmt.Errorf("passwordEnv: environment variable %s is not set", uf.PasswordEnv)
	}
	return Credential(uf.Username, []byte(v))
}

// Credential turns the content of a password file or Secret key into a bcrypt hash and a
// fingerprint. The content is a bcrypt hash ($2a$, $2b$, $2y$), kept as is, or a plaintext
// password (trailing newlines dropped), hashed here.
func Credential(username string, content []byte) ([]byte, string, error) {
	plain := strings.TrimRight(string(content), "\r\n")
	if isBcrypt(plain) {
		if _, err := bcrypt.Cost([]byte(plain)); err == nil {
			return []byte(plain), hashFingerprint(username, []byte(plain)), nil
		}
	}
	if plain == "" {
		return nil, "", errors.New("the password is empty")
	}
	if len(plain) > 72 {
		return nil, "", errors.New("the password is longer than bcrypt's 72 bytes")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(plain), PlaintextCost)
	if err != nil {
		return nil, "", err
	}
	return hash, plainFingerprint(username, plain), nil
}

// PlaintextCost is the bcrypt cost plaintext passwords are hashed with (tests lower it).
var PlaintextCost = bcrypt.DefaultCost

func isBcrypt(s string) bool {
	return len(s) == 60 && (strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$"))
}

// fingerprintDomain separates fingerprints from any other use of the same inputs.
const fingerprintDomain = "kubevirt-redfish credential fingerprint v1\x00"

// hashFingerprint fingerprints a configured bcrypt hash: the hash already is a slow, salted
// digest, so a plain SHA-256 of it reveals nothing more.
func hashFingerprint(username string, hash []byte) string {
	sum := sha256.Sum256([]byte(fingerprintDomain + "bcrypt\x00" + username + "\x00" + string(hash)))
	return hex.EncodeToString(sum[:16])
}

// plainFingerprint fingerprints a plaintext password. bcrypt salts randomly, so each replica
// hashes the same password differently; the fingerprint must be equal on every replica, so it
// uses Argon2id (memory-hard, salted with the username) instead: stored in session Secrets, it
// is as costly to attack as a bcrypt hash.
func plainFingerprint(username, plain string) string {
	salt := sha256.Sum256([]byte(fingerprintDomain + "salt\x00" + username))
	return hex.EncodeToString(argon2.IDKey([]byte(plain), salt[:16], 2, 19*1024, 1, 16))
}

func joinLines(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n  "))
}
