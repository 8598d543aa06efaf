// Package config loads and validates the kubevirt-redfish YAML configuration: where to listen,
// which VMs are exposed (the allowlist) and who may use them.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"

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
}

// MediaFile says how InsertMedia imports images: where they may come from and the storage of
// the DataVolumes, globally and per namespace.
type MediaFile struct {
	StorageFile `yaml:",inline"`
	// AllowedHosts limits image URLs to these host names ("*.example.com" matches
	// subdomains) and CIDRs; empty allows any host.
	AllowedHosts []string               `yaml:"allowedHosts"`
	Namespaces   map[string]StorageFile `yaml:"namespaces"`
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
}

// TLSFile names the serving certificate. Both empty means plain HTTP.
type TLSFile struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// EntryFile is one allowlist entry: a namespace, optionally narrowed by a label selector and
// VM name globs.
type EntryFile struct {
	Name      string   `yaml:"name"`
	Namespace string   `yaml:"namespace"`
	Selector  string   `yaml:"selector"`
	VMs       []string `yaml:"vms"`
}

// UserFile is one account. Exactly one of PasswordHash, PasswordFile and PasswordEnv is set.
type UserFile struct {
	Username     string   `yaml:"username"`
	Role         string   `yaml:"role"`
	PasswordHash string   `yaml:"passwordHash"`
	PasswordFile string   `yaml:"passwordFile"`
	PasswordEnv  string   `yaml:"passwordEnv"`
	Allow        []string `yaml:"allow"`
}

// Config is the validated, compiled configuration.
type Config struct {
	Listen    string
	TLS       TLSFile
	LogLevel  string
	Allowlist []*Entry
	Users     map[string]*User
	Media     Media
}

// Media is the compiled media configuration.
type Media struct {
	Default      Storage
	Namespaces   map[string]Storage
	AllowedHosts []string
	AllowedNets  []*net.IPNet
}

// Storage is compiled StorageFile.
type Storage struct {
	Size         *resource.Quantity
	StorageClass string
	AccessModes  []corev1.PersistentVolumeAccessMode
	VolumeMode   *corev1.PersistentVolumeMode
	CAConfigMap  string
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
	// Hash is a bcrypt hash; plaintext passwords are hashed when loaded.
	Hash    []byte
	Entries []*Entry
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

func compileMedia(mf MediaFile, errs []error) (Media, []error) {
	m := Media{Namespaces: map[string]Storage{}}
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
	if sf.CAConfigMap != "" {
		s.CAConfigMap = sf.CAConfigMap
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
	hash, err := passwordHash(uf)
	if err != nil {
		bad("password", "%v", err)
	}
	u.Hash = hash
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

// passwordHash returns the bcrypt hash for a user, hashing a plaintext password from a file or
// the environment so that only the hash stays in memory.
func passwordHash(uf UserFile) ([]byte, error) {
	set := 0
	for _, s := range []string{uf.PasswordHash, uf.PasswordFile, uf.PasswordEnv} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("exactly one of passwordHash, passwordFile and passwordEnv must be set")
	}
	if uf.PasswordHash != "" {
		if _, err := bcrypt.Cost([]byte(uf.PasswordHash)); err != nil {
			return nil, fmt.Errorf("passwordHash is not a bcrypt hash: %v", err)
		}
		return []byte(uf.PasswordHash), nil
	}
	var plain string
	if uf.PasswordFile != "" {
		data, err := os.ReadFile(uf.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("passwordFile: %v", err)
		}
		plain = strings.TrimRight(string(data), "\r\n")
	} else {
		v, ok := os.LookupEnv(uf.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("passwordEnv: environment variable %s is not set", uf.PasswordEnv)
		}
		plain = v
	}
	if plain == "" {
		return nil, errors.New("the password is empty")
	}
	if len(plain) > 72 {
		return nil, errors.New("the password is longer than bcrypt's 72 bytes")
	}
	return bcrypt.GenerateFromPassword([]byte(plain), bcrypt.DefaultCost)
}

func joinLines(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n  "))
}
