package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse feeds configuration loading any document. Seeds are the configurations the
// project ships (examples/, deploy/) and variants of each section. A document is either
// refused with an error or compiles into a Config that holds the invariants the server relies
// on; it never panics or hangs.
func FuzzParse(f *testing.F) {
	PlaintextCost = bcrypt.MinCost // plaintext passwords are hashed at load; keep runs fast
	for _, p := range []string{"../../examples/config.yaml", "../../deploy/base/config.yaml"} {
		if b, err := os.ReadFile(filepath.FromSlash(p)); err == nil {
			f.Add(b)
		}
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("password"), bcrypt.MinCost)
	user := "users:\n  - username: admin\n    passwordHash: " + string(hash) + "\n    allow: [\"*\"]\n"
	for _, doc := range []string{
		"allowlist:\n  - namespace: tenant-a\n" + user,
		"listen: 127.0.0.1:8000\ntls: {insecureHTTP: true}\nallowlist: [{name: a, namespace: tenant-a, selector: 'x=y', vms: ['cp-*']}]\n" + user,
		"allowlist: [{namespace: tenant-a}]\nsessions: {timeout: 30m, maxLifetime: 24h, maxPerUser: 4}\nlockout: {threshold: 5, peerThreshold: 20, window: 10m, duration: 10m}\ntrustedProxies: [10.0.0.0/8, 192.0.2.1/32]\nreloadInterval: 5s\n" + user,
		"allowlist: [{namespace: tenant-a}]\nmedia: {size: 10Gi, storageClass: fast, accessModes: [ReadWriteOnce], volumeMode: Block, allowedHosts: ['*.example.com', 192.0.2.0/24], namespaces: {tenant-a: {size: 2Gi}}}\n" + user,
		"allowlist: [{namespace: tenant-a}]\nusers: [{username: op, role: Operator, passwordEnv: KRF_FUZZ_UNSET, allow: [tenant-a]}]\n",
		"allowlist: [{namespace: tenant-a}]\nusers: [{username: op, role: ReadOnly, passwordSecret: {name: s, key: k}, allow: [tenant-a]}]\n",
		"allowlist: [{namespace: Tenant_A}]\nusers: []\n", "{}", "", "- a\n- b\n", "a: &a [*a]\n", "allowlist: !!binary AAAA\n",
		"sessions: {timeout: 1ns}\n", "lockout: {threshold: -1}\n", "unknownKey: 1\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		c, err := Parse(data)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("loading %d bytes took %v", len(data), took)
		}
		if err != nil {
			if c != nil {
				t.Fatal("an error and a config")
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if len(c.Allowlist) == 0 || len(c.Users) == 0 {
			t.Fatalf("a config without allowlist or users: %q", data)
		}
		for _, ns := range c.Namespaces() {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				t.Fatalf("namespace %q accepted", ns)
			}
		}
		for name, u := range c.Users {
			if u == nil || u.Username != name {
				t.Fatalf("user %q compiled as %+v", name, u)
			}
			switch u.Role {
			case RoleAdministrator, RoleOperator, RoleReadOnly:
			default:
				t.Fatalf("user %q has role %q", name, u.Role)
			}
		}
		if c.Sessions.Timeout <= 0 || c.Lockout.Threshold <= 0 || c.Lockout.PeerThreshold <= 0 || c.ReloadInterval <= 0 {
			t.Fatalf("limits not positive: sessions %+v lockout %+v reload %v", c.Sessions, c.Lockout, c.ReloadInterval)
		}
		switch c.LogLevel {
		case "debug", "info", "warn", "error":
		default:
			t.Fatalf("log level %q", c.LogLevel)
		}
	})
}
