// Package stack runs kubevirt-redfish in-process over HTTP against a real kube-apiserver and
// etcd (test/testenv) with the real KubeVirt CRDs, the simulator playing virt-controller. The
// integration and client tests share it; the binary and reliability tests share its cluster
// (StartCluster), the build of the server binary and the image server.
package stack

import (
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/credentials"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/server"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// Users of the stack's configuration; every one has Password.
const (
	Admin        = "admin"          // all tenants
	TenantAdmin  = "tenant-a-admin" // tenant-a only
	Reader       = "reader"         // ReadOnly, all tenants
	TenantBAdmin = "tenant-b-admin" // tenant-b only: it holds one system, tenant-b.cp-0
	Password     = "password"
)

// Namespace is the servers' own namespace: sessions and passwordSecret Secrets live there.
const Namespace = "kubevirt-redfish"

// Options tune a stack.
type Options struct {
	Sim sim.Options
	// Config replaces the default configuration (Config).
	Config *config.Config
	// CacheRetention, when set, is how long servers keep unused image caches (swept every
	// tenth of that).
	CacheRetention time.Duration
}

// Replica is one running server of the stack.
type Replica struct {
	// URL is the base URL (no /redfish/v1).
	URL string
	// Server serves URL; Sessions is its session store; Credentials its password reloader.
	Server      *server.Server
	Sessions    *sessions.Store
	Credentials *credentials.Reloader
	// Logs holds everything the replica logged at info level and above.
	Logs *observer.ObservedLogs
}

// Stack is a running kubevirt-redfish over a real apiserver.
type Stack struct {
	*Cluster
	// URL is the base URL of the first server (no /redfish/v1).
	URL string
	// First is the first server.
	First *Replica
	cfg   *config.Config
	opts  Options
}

// Start brings up the apiserver, the demo VMs (tenant-a/cp-0..2, tenant-b/cp-0, all off), the
// simulator and one server. Everything stops when the test ends.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	c := StartCluster(t, ClusterOptions{Sim: opts.Sim})
	cfg := opts.Config
	if cfg == nil {
		cfg = Config(t)
	}
	s := &Stack{Cluster: c, cfg: cfg, opts: opts}
	s.First = s.AddReplica(t)
	s.URL = s.First.URL
	return s
}

// AddServer starts one more server replica over the same cluster and returns its base URL.
func (s *Stack) AddServer(t testing.TB) string {
	t.Helper()
	return s.AddReplica(t).URL
}

// AddReplica starts one more server replica over the same cluster: its own informers, session
// store and credential reloader, as a separate pod would have.
func (s *Stack) AddReplica(t testing.TB) *Replica {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core(), core))
	client := kubevirt.NewClient(dyn, s.cfg.Namespaces(), log)
	client.CDROMHotplug = s.opts.Sim.DeclarativeHotplug
	if s.opts.CacheRetention > 0 {
		client.CacheRetention, client.SweepInterval = s.opts.CacheRetention, s.opts.CacheRetention/10
	}
	if err := client.Start(s.Ctx); err != nil {
		t.Fatal(err)
	}
	go client.RunBackground(s.Ctx)
	store := sessions.New(dyn, sessions.Options{Namespace: Namespace, Timeout: s.cfg.Sessions.Timeout,
		MaxLifetime: s.cfg.Sessions.MaxLifetime, MaxPerUser: s.cfg.Sessions.MaxPerUser, Log: log})
	if err := store.Start(s.Ctx); err != nil {
		t.Fatal(err)
	}
	handler := server.New(s.cfg, client, log, server.WithSessions(store))
	creds := credentials.New(s.cfg, credentials.Options{Namespace: Namespace, Dyn: dyn, Apply: handler.SetConfig, Log: log})
	if err := creds.Start(s.Ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &Replica{URL: srv.URL, Server: handler, Sessions: store, Credentials: creds, Logs: logs}
}

// Config is the configuration the stack serves: the demo tenants and three users.
func Config(t testing.TB) *config.Config {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f := config.File{
		Listen: "127.0.0.1:0",
		Allowlist: []config.EntryFile{
			{Name: "tenant-a", Namespace: "tenant-a"},
			{Name: "tenant-b", Namespace: "tenant-b"},
		},
		Users: []config.UserFile{
			{Username: Admin, PasswordHash: string(hash), Allow: []string{"*"}},
			{Username: TenantAdmin, PasswordHash: string(hash), Allow: []string{"tenant-a"}},
			{Username: Reader, Role: config.RoleReadOnly, PasswordHash: string(hash), Allow: []string{"*"}},
			{Username: TenantBAdmin, PasswordHash: string(hash), Allow: []string{"tenant-b"}},
		},
	}
	cfg, err := f.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
