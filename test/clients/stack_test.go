// Package clients drives kubevirt-redfish with real Redfish clients: sushy (the library Ironic
// and Metal3 use) and DMTF's redfishtool. Both are Debian packages (python3-sushy,
// redfishtool); the tests fail, rather than skip, when they are missing.
package clients

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/server"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// Stack is a running kubevirt-redfish for the clients to talk to.
//
// Whatever the backend, the cluster behind it holds the demo machines (sim.ControlPlaneVM):
// tenant-a/cp-0, tenant-a/cp-1, tenant-a/cp-2 and tenant-b/cp-0, all powered off, with a
// simulator playing virt-controller for them. Each test gets a stack of its own, so tests may
// change power and boot state freely.
type Stack struct {
	// BaseURL is scheme://host:port, without a trailing slash.
	BaseURL string
	// User and Password are an Administrator who sees every system.
	User, Password string
	// SingleUser (same password) is an Administrator who sees only SingleSystem.
	SingleUser, SingleSystem string

	logs *testenv.SyncBuffer
}

// Host is BaseURL without its scheme (redfishtool's -r).
func (s *Stack) Host() string {
	_, host, _ := strings.Cut(s.BaseURL, "://")
	return host
}

// Logs is what the server logged so far.
func (s *Stack) Logs() string { return s.logs.String() }

// backendEnv selects the cluster behind the server: "apiserver" (the default: a real
// kube-apiserver and etcd with the KubeVirt and CDI CRDs, test/stack) or "sim" (the demo's
// in-memory cluster).
const backendEnv = "KRF_CLIENTS_BACKEND"

// Simulated boot and shutdown times: long enough for PoweringOn/PoweringOff to be seen, short
// enough for Ironic's 1 s power polling to find the target state at its first look.
const (
	bootDelay     = 300 * time.Millisecond
	shutdownDelay = 300 * time.Millisecond
)

// startServer starts kubevirt-redfish over the backend named by $KRF_CLIENTS_BACKEND and stops
// it when the test ends. On failure the server's log is printed.
func startServer(t *testing.T) *Stack {
	t.Helper()
	switch b := os.Getenv(backendEnv); b {
	case "", "apiserver":
		return startAPIServerStack(t)
	case "sim":
		return startSimServer(t)
	default:
		t.Fatalf("%s=%q: unknown backend (known: apiserver, sim)", backendEnv, b)
		return nil
	}
}

// startAPIServerStack serves VMs stored in a real kube-apiserver (test/stack).
func startAPIServerStack(t *testing.T) *Stack {
	t.Helper()
	s := stack.Start(t, stack.Options{Sim: sim.Options{BootDelay: bootDelay, ShutdownDelay: shutdownDelay}})
	return newStack(s.URL)
}

// newStack describes a server at baseURL that serves the users of stack.Config.
func newStack(baseURL string) *Stack {
	return &Stack{
		BaseURL: baseURL, User: stack.Admin, Password: stack.Password,
		SingleUser: stack.TenantBAdmin, SingleSystem: "tenant-b.cp-0",
		logs: &testenv.SyncBuffer{},
	}
}

// startSimServer serves the demo cluster (client-go's fake dynamic client driven by the
// simulator) through an in-process server.
func startSimServer(t *testing.T) *Stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	dyn, err := sim.NewDemoCluster()
	if err != nil {
		t.Fatalf("demo cluster: %v", err)
	}
	if err := sim.New(dyn, sim.Options{BootDelay: bootDelay, ShutdownDelay: shutdownDelay}).Run(ctx); err != nil {
		t.Fatalf("simulator: %v", err)
	}

	// The same configuration and users as the apiserver backend; the URL comes once it serves.
	cfg := stack.Config(t)
	st := newStack("")

	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(st.logs), zapcore.DebugLevel))
	client := kubevirt.NewClient(dyn, cfg.Namespaces(), log)
	if err := client.Start(ctx); err != nil {
		t.Fatalf("kubevirt client: %v", err)
	}
	go client.RunBackground(ctx)
	// Session login as in --demo: sessions are Secrets in the server's namespace.
	store := sessions.New(dyn, sessions.Options{Namespace: stack.Namespace, Timeout: cfg.Sessions.Timeout,
		MaxLifetime: cfg.Sessions.MaxLifetime, MaxPerUser: cfg.Sessions.MaxPerUser, Log: log})
	if err := store.Start(ctx); err != nil {
		t.Fatalf("session store: %v", err)
	}
	srv := httptest.NewServer(server.New(cfg, client, log, server.WithSessions(store)))
	// Cleanups run last-in first-out: the server stops before the context is cancelled.
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", st.Logs())
		}
	})
	st.BaseURL = srv.URL
	return st
}
