package stack

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// Cluster is a real apiserver with the servers' Namespace and the demo VMs (tenant-a/cp-0..2,
// tenant-b/cp-0, all off), the simulator playing virt-controller for them: everything a
// kubevirt-redfish server needs, without the server.
type Cluster struct {
	Env *testenv.Env
	// Dyn is the simulator's client.
	Dyn dynamic.Interface
	Sim *sim.Simulator
	// Ctx ends when the test does.
	Ctx context.Context
}

// ClusterOptions tune a Cluster.
type ClusterOptions struct {
	// Sim configures the simulator; a zero BootDelay or ShutdownDelay becomes 300 ms, long
	// enough for PoweringOn and PoweringOff to be seen.
	Sim sim.Options
	// WrapTransport, when set, wraps the transport of Dyn.
	WrapTransport transport.WrapperFunc
}

// StartCluster brings up the apiserver, creates the namespaces and the demo VMs and runs the
// simulator. Everything stops when the test ends.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	env := testenv.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rc := rest.CopyConfig(env.Config)
	if opts.WrapTransport != nil {
		rc.Wrap(opts.WrapTransport)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{Namespace}, sim.DemoNamespaces...) {
		if err := env.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, vm := range sim.DemoVMs() {
		u, err := sim.ToUnstructured(vm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating VM %s/%s: %v", vm.Namespace, vm.Name, err)
		}
	}
	if opts.Sim.BootDelay == 0 {
		opts.Sim.BootDelay = 300 * time.Millisecond
	}
	if opts.Sim.ShutdownDelay == 0 {
		opts.Sim.ShutdownDelay = 300 * time.Millisecond
	}
	c := &Cluster{Env: env, Dyn: dyn, Sim: sim.New(dyn, opts.Sim), Ctx: ctx}
	if err := c.Sim.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago, for a server that
// must be told where to listen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
