package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/labels"
)

func hashOf(t testing.TB, pass string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

// validFile is a configuration every test starts from.
func validFile(t testing.TB) File {
	return File{
		Listen: "127.0.0.1:8000",
		Allowlist: []EntryFile{
			{Name: "tenant-a", Namespace: "tenant-a"},
			{Name: "cp-b", Namespace: "tenant-b", Selector: "role=control-plane", VMs: []string{"cp-*"}},
		},
		Users: []UserFile{
			{Username: "admin", PasswordHash: hashOf(t, "secret"), Allow: []string{"*"}},
			{Username: "alice", Role: RoleOperator, PasswordHash: hashOf(t, "alice-pw"), Allow: []string{"tenant-a"}},
			{Username: "viewer", Role: RoleReadOnly, PasswordHash: hashOf(t, "view"), Allow: []string{"tenant-a", "cp-b"}},
		},
	}
}

func TestCompileValid(t *testing.T) {
	f := validFile(t)
	c, err := f.Compile()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8000", c.Listen)
	assert.Equal(t, "info", c.LogLevel, "default log level")
	require.Len(t, c.Allowlist, 2)
	assert.Equal(t, []string{"tenant-a", "tenant-b"}, c.Namespaces())
	require.Len(t, c.Users, 3)

	admin := c.Users["admin"]
	require.NotNil(t, admin)
	assert.Equal(t, RoleAdministrator, admin.Role, "default role")
	assert.Len(t, admin.Entries, 2, "'*' allows every entry")
	assert.NoError(t, bcrypt.CompareHashAndPassword(admin.Hash, []byte("secret")))
	assert.True(t, admin.MayWrite())

	alice := c.Users["alice"]
	assert.Equal(t, RoleOperator, alice.Role)
	require.Len(t, alice.Entries, 1)
	assert.Same(t, c.Allowlist[0], alice.Entries[0], "users share the compiled entries")
	assert.True(t, alice.MayWrite())

	viewer := c.Users["viewer"]
	assert.False(t, viewer.MayWrite())
	assert.Len(t, viewer.Entries, 2)

	sel := c.Allowlist[1].Selector
	require.NotNil(t, sel)
	assert.True(t, sel.Matches(labels.Set{"role": "control-plane"}))
	assert.Nil(t, c.Allowlist[0].Selector)
}

func TestCompileDefaults(t *testing.T) {
	f := validFile(t)
	f.Listen = ""
	f.Allowlist[0].Name = ""
	f.Users[1].Allow = []string{"tenant-a"} // the default name is the namespace
	c, err := f.Compile()
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:8443", c.Listen)
	assert.Equal(t, "tenant-a", c.Allowlist[0].Name)
}

func TestParseYAML(t *testing.T) {
	yml := `
listen: ":8443"
logLevel: debug
tls:
  certFile: /tls/tls.crt
  keyFile: /tls/tls.key
allowlist:
  - namespace: tenant-a
    selector: "cluster=tenant-a,role in (control-plane,worker)"
    vms: ["cp-*", "worker-?"]
users:
  - username: ironic
    role: Operator
    passwordHash: "` + hashOf(t, "pw") + `"
    allow: [tenant-a]
`
	c, err := Parse([]byte(yml))
	require.NoError(t, err)
	assert.Equal(t, ":8443", c.Listen)
	assert.Equal(t, "debug", c.LogLevel)
	assert.Equal(t, TLSFile{CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key"}, c.TLS)
	assert.Equal(t, []string{"cp-*", "worker-?"}, c.Allowlist[0].VMs)
	assert.Equal(t, RoleOperator, c.Users["ironic"].Role)

	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yml), 0o600))
	c2, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, c.Listen, c2.Listen)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml")
}

func TestParseUnknownField(t *testing.T) {
	tests := map[string]string{
		"top level":       "listen: x\nlisten_port: 1\n",
		"in an entry":     "allowlist:\n  - namespace: a\n    namespaces: [b]\n",
		"in a user":       "users:\n  - username: a\n    password: x\n",
		"in tls":          "tls:\n  cert: x\n",
		"misspelled case": "logLevel: info\nLogLevel: info\n",
	}
	fields := map[string]string{
		"top level": "listen_port", "in an entry": "namespaces", "in a user": "password",
		"in tls": "cert", "misspelled case": "LogLevel",
	}
	for name, yml := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(yml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), fields[name])
		})
	}
}

func TestParseWrongType(t *testing.T) {
	_, err := Parse([]byte("allowlist: tenant-a\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config:")
}

func TestCompileErrorsNameTheirKey(t *testing.T) {
	t.Setenv("KVRF_TEST_UNSET", "")
	os.Unsetenv("KVRF_TEST_UNSET")
	tests := []struct {
		name   string
		mutate func(f *File)
		key    string
		also   string
	}{
		{"bad namespace", func(f *File) { f.Allowlist[0].Namespace = "Tenant_A" }, "allowlist[0].namespace", "Tenant_A"},
		{"empty namespace", func(f *File) { f.Allowlist[1].Namespace = "" }, "allowlist[1].namespace", ""},
		{"namespace with a dot", func(f *File) { f.Allowlist[0].Namespace = "tenant.a" }, "allowlist[0].namespace", "tenant.a"},
		{"duplicate entry name", func(f *File) { f.Allowlist[1].Name = "tenant-a" }, "allowlist[1].name", `"tenant-a"`},
		{"duplicate default entry name", func(f *File) {
			f.Allowlist = append(f.Allowlist, EntryFile{Namespace: "tenant-a"})
		}, "allowlist[2].name", `"tenant-a"`},
		{"bad selector", func(f *File) { f.Allowlist[1].Selector = "role in (" }, "allowlist[1].selector", ""},
		{"bad selector operator", func(f *File) { f.Allowlist[1].Selector = "role=~cp" }, "allowlist[1].selector", ""},
		{"bad glob", func(f *File) { f.Allowlist[1].VMs = []string{"cp-*", "cp-["} }, "allowlist[1].vms[1]", `"cp-["`},
		{"bad glob after a mismatch", func(f *File) { f.Allowlist[1].VMs = []string{"x[a-"} }, "allowlist[1].vms[0]", ""},
		{"no allowlist", func(f *File) { f.Allowlist = nil; f.Users[1].Allow = nil; f.Users[2].Allow = nil }, "allowlist:", ""},
		{"no users", func(f *File) { f.Users = nil }, "users:", ""},
		{"no password source", func(f *File) { f.Users[1].PasswordHash = "" }, "users[1].password", "exactly one"},
		{"two password sources", func(f *File) { f.Users[1].PasswordEnv = "HOME" }, "users[1].password", "exactly one"},
		{"three password sources", func(f *File) { f.Users[0].PasswordEnv = "HOME"; f.Users[0].PasswordFile = "/etc/hostname" }, "users[0].password", "exactly one"},
		{"passwordEnv unset", func(f *File) { f.Users[2].PasswordHash = ""; f.Users[2].PasswordEnv = "KVRF_TEST_UNSET" }, "users[2].password", "KVRF_TEST_UNSET"},
		{"passwordFile missing", func(f *File) {
			f.Users[0].PasswordHash = ""
			f.Users[0].PasswordFile = "/nonexistent/kvrf-password"
		}, "users[0].password", "/nonexistent/kvrf-password"},
		{"bad bcrypt hash", func(f *File) { f.Users[1].PasswordHash = "$2a$10$tooshort" }, "users[1].password", "bcrypt"},
		{"plaintext in passwordHash", func(f *File) { f.Users[1].PasswordHash = "alice-pw" }, "users[1].password", "bcrypt"},
		{"unknown role", func(f *File) { f.Users[1].Role = "root" }, "users[1].role", `"root"`},
		{"role is case sensitive", func(f *File) { f.Users[1].Role = "operator" }, "users[1].role", `"operator"`},
		{"allow names an unknown entry", func(f *File) { f.Users[1].Allow = []string{"tenant-a", "tenant-c"} }, "users[1].allow[1]", `"tenant-c"`},
		{"allow names a namespace, not the entry name", func(f *File) { f.Users[1].Allow = []string{"tenant-b"} }, "users[1].allow[0]", `"tenant-b"`},
		{"empty username", func(f *File) { f.Users[1].Username = "" }, "users[1].username", ""},
		{"colon in username", func(f *File) { f.Users[1].Username = "a:b" }, "users[1].username", ""},
		{"duplicate username", func(f *File) { f.Users[2].Username = "alice" }, "users[2].username", `"alice"`},
		{"tls cert without key", func(f *File) { f.TLS.CertFile = "/tls/tls.crt" }, "tls:", "keyFile"},
		{"tls key without cert", func(f *File) { f.TLS.KeyFile = "/tls/tls.key" }, "tls:", "certFile"},
		{"bad logLevel", func(f *File) { f.LogLevel = "verbose" }, "logLevel:", `"verbose"`},
		{"insecureTLS with caConfigMap", func(f *File) { f.Media.CAConfigMap, f.Media.InsecureTLS = "ca", true }, "media.insecureTLS", "caConfigMap"},
		{"insecureTLS with caConfigMap in a namespace", func(f *File) {
			f.Media.Namespaces = map[string]StorageFile{"tenant-a": {CAConfigMap: "ca", InsecureTLS: true}}
		}, "media.namespaces.tenant-a.insecureTLS", "caConfigMap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := validFile(t)
			tc.mutate(&f)
			c, err := f.Compile()
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tc.key)
			if tc.also != "" {
				assert.Contains(t, err.Error(), tc.also)
			}
		})
	}
}

func TestCompileReportsEveryError(t *testing.T) {
	f := validFile(t)
	f.LogLevel = "loud"
	f.Allowlist[0].Namespace = "BAD"
	f.Users[1].Role = "root"
	f.Users[2].Allow = []string{"nope"}
	_, err := f.Compile()
	require.Error(t, err)
	for _, key := range []string{"logLevel", "allowlist[0].namespace", "users[1].role", "users[2].allow[0]"} {
		assert.Contains(t, err.Error(), key)
	}
	assert.Equal(t, 5, strings.Count(err.Error(), "\n")+1, "one line per error plus the heading: %s", err)
}

func TestPasswordSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(file, []byte("from-file\r\n"), 0o600))
	t.Setenv("KVRF_TEST_PW", "from-env")

	f := validFile(t)
	f.Users[0].PasswordHash, f.Users[0].PasswordFile = "", file
	f.Users[1].PasswordHash, f.Users[1].PasswordEnv = "", "KVRF_TEST_PW"
	c, err := f.Compile()
	require.NoError(t, err)
	assert.NoError(t, bcrypt.CompareHashAndPassword(c.Users["admin"].Hash, []byte("from-file")), "trailing newline is trimmed")
	assert.NoError(t, bcrypt.CompareHashAndPassword(c.Users["alice"].Hash, []byte("from-env")))
	assert.NotContains(t, string(c.Users["alice"].Hash), "from-env", "only the hash is kept")

	// Empty and over-long plaintext passwords are refused.
	require.NoError(t, os.WriteFile(file, []byte("\n"), 0o600))
	_, err = f.Compile()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "users[0].password")
	assert.Contains(t, err.Error(), "empty")

	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	t.Setenv("KVRF_TEST_PW", strings.Repeat("p", 73))
	_, err = f.Compile()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "users[1].password")
	assert.Contains(t, err.Error(), "72")

	t.Setenv("KVRF_TEST_PW", "")
	_, err = f.Compile()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "users[1].password")
}

func TestEntryMatches(t *testing.T) {
	sel, err := labels.Parse("role=control-plane")
	require.NoError(t, err)
	tests := []struct {
		name  string
		entry Entry
		ns    string
		vm    string
		lbls  map[string]string
		want  bool
	}{
		{"whole namespace", Entry{Namespace: "a"}, "a", "anything", nil, true},
		{"other namespace", Entry{Namespace: "a"}, "b", "anything", nil, false},
		{"selector matches", Entry{Namespace: "a", Selector: sel}, "a", "x", map[string]string{"role": "control-plane", "z": "1"}, true},
		{"selector does not match", Entry{Namespace: "a", Selector: sel}, "a", "x", map[string]string{"role": "worker"}, false},
		{"selector, no labels", Entry{Namespace: "a", Selector: sel}, "a", "x", nil, false},
		{"glob matches", Entry{Namespace: "a", VMs: []string{"cp-*"}}, "a", "cp-0", nil, true},
		{"glob matches a dotted name", Entry{Namespace: "a", VMs: []string{"cp-*"}}, "a", "cp-0.example", nil, true},
		{"second glob matches", Entry{Namespace: "a", VMs: []string{"cp-*", "worker-?"}}, "a", "worker-1", nil, true},
		{"? is one character", Entry{Namespace: "a", VMs: []string{"worker-?"}}, "a", "worker-10", nil, false},
		{"glob is anchored", Entry{Namespace: "a", VMs: []string{"cp"}}, "a", "cp-0", nil, false},
		{"character class", Entry{Namespace: "a", VMs: []string{"cp-[0-2]"}}, "a", "cp-2", nil, true},
		{"character class miss", Entry{Namespace: "a", VMs: []string{"cp-[0-2]"}}, "a", "cp-3", nil, false},
		{"selector and glob both needed", Entry{Namespace: "a", Selector: sel, VMs: []string{"cp-*"}}, "a", "cp-0", map[string]string{"role": "worker"}, false},
		{"selector and glob both match", Entry{Namespace: "a", Selector: sel, VMs: []string{"cp-*"}}, "a", "cp-0", map[string]string{"role": "control-plane"}, true},
		{"glob miss with selector match", Entry{Namespace: "a", Selector: sel, VMs: []string{"cp-*"}}, "a", "db-0", map[string]string{"role": "control-plane"}, false},
		{"everything selector", Entry{Namespace: "a", Selector: labels.Everything()}, "a", "x", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.entry.Matches(tc.ns, tc.vm, tc.lbls))
		})
	}
}

func TestUserMaySee(t *testing.T) {
	c, err := func() (*Config, error) { f := validFile(t); return f.Compile() }()
	require.NoError(t, err)
	cp := map[string]string{"role": "control-plane"}
	tests := []struct {
		user string
		ns   string
		vm   string
		lbls map[string]string
		want bool
	}{
		{"admin", "tenant-a", "anything", nil, true},
		{"admin", "tenant-b", "cp-0", cp, true},
		{"admin", "tenant-b", "cp-0", nil, false}, // not exposed by any entry
		{"admin", "tenant-b", "db-0", cp, false},
		{"admin", "tenant-c", "cp-0", cp, false},
		{"alice", "tenant-a", "cp-0", nil, true},
		{"alice", "tenant-b", "cp-0", cp, false},
		{"viewer", "tenant-b", "cp-1", cp, true},
		{"viewer", "tenant-a", "x", nil, true},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, c.Users[tc.user].MaySee(tc.ns, tc.vm, tc.lbls), "%s sees %s/%s", tc.user, tc.ns, tc.vm)
		if tc.want {
			assert.True(t, c.Exposed(tc.ns, tc.vm, tc.lbls), "a user never sees more than the allowlist exposes")
		}
	}
	assert.False(t, (&User{}).MaySee("tenant-a", "cp-0", nil), "a user without entries sees nothing")
}

func TestNamespacesDeduplicated(t *testing.T) {
	f := validFile(t)
	f.Allowlist = append(f.Allowlist, EntryFile{Name: "a-workers", Namespace: "tenant-a", VMs: []string{"worker-*"}},
		EntryFile{Name: "c", Namespace: "tenant-c"})
	c, err := f.Compile()
	require.NoError(t, err)
	assert.Equal(t, []string{"tenant-a", "tenant-b", "tenant-c"}, c.Namespaces())
}

func TestMayWrite(t *testing.T) {
	assert.True(t, (&User{Role: RoleAdministrator}).MayWrite())
	assert.True(t, (&User{Role: RoleOperator}).MayWrite())
	assert.False(t, (&User{Role: RoleReadOnly}).MayWrite())
	assert.False(t, (&User{}).MayWrite())
}

// A namespace's way of trusting HTTPS image servers replaces the inherited one: a CA bundle and
// trusting the presented certificate exclude each other.
func TestMediaTLSTrustInherits(t *testing.T) {
	f := validFile(t)
	f.Media.CAConfigMap = "corp-ca"
	f.Media.Namespaces = map[string]StorageFile{
		"tenant-a": {InsecureTLS: true},
		"tenant-b": {StorageClass: "fast"},
	}
	c, err := f.Compile()
	require.NoError(t, err)
	assert.Equal(t, Storage{CAConfigMap: "corp-ca"}, c.Media.Default)
	assert.Equal(t, Storage{InsecureTLS: true}, c.Media.StorageFor("tenant-a"))
	assert.Equal(t, Storage{CAConfigMap: "corp-ca", StorageClass: "fast"}, c.Media.StorageFor("tenant-b"))

	f.Media.CAConfigMap, f.Media.InsecureTLS = "", true
	f.Media.Namespaces = map[string]StorageFile{"tenant-a": {CAConfigMap: "tenant-ca"}}
	c, err = f.Compile()
	require.NoError(t, err)
	assert.Equal(t, Storage{CAConfigMap: "tenant-ca"}, c.Media.StorageFor("tenant-a"))
	assert.Equal(t, Storage{InsecureTLS: true}, c.Media.StorageFor("tenant-b"))
}
