package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// Benchmarks of the hot paths of a GET, for `go test -bench` and pprof:
//
//	go test ./pkg/server -run '^$' -bench . -benchmem -cpuprofile /tmp/cpu.out
//	go tool pprof -top /tmp/cpu.out
//
// The whole-server numbers, against a real kube-apiserver and with a bare net/http ceiling
// for comparison, come from `make bench` (BENCHMARKS.md).

const (
	benchNamespaces = 10
	benchPassword   = "bench-password"
)

// benchMachine is VM i of a benchmark fleet, shaped like an OpenShift node VM, running (with a
// Running VMI) when i is even. Every namespace is a cluster of 3 control-plane VMs (the first
// three) and workers; 50 running VMIs share each hosting node.
func benchMachine(i int) (*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) {
	ns := fmt.Sprintf("bench-%d", i%benchNamespaces)
	vm := sim.ControlPlaneVM(ns, fmt.Sprintf("vm-%05d", i), i)
	vm.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1))
	vm.ResourceVersion = "1" // as the apiserver would: the server keeps rendered bodies by version
	if i/benchNamespaces >= 3 {
		labels := map[string]string{"cluster": ns, "role": "worker"}
		vm.Labels, vm.Spec.Template.ObjectMeta.Labels = labels, labels
	}
	if i%2 != 0 {
		return vm, nil
	}
	always := virtv1.RunStrategyAlways
	vm.Spec.RunStrategy = &always
	vmi := &virtv1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: ns, ResourceVersion: "1",
			UID: types.UID(fmt.Sprintf("10000000-0000-4000-8000-%012d", i+1))},
		Spec: vm.Spec.Template.Spec,
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: fmt.Sprintf("node-%d", i/100),
			Interfaces: []virtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", MAC: "02:00:00:00:00:01", IP: "10.128.0.1"}}},
	}
	return vm, vmi
}

// benchServer serves n machines through a real kubevirt.Client over client-go's fake dynamic
// client, with one Administrator whose password hash has bcrypt's default cost.
func benchServer(b testing.TB, n int) *Server {
	b.Helper()
	var objs []runtime.Object
	for i := range n {
		vm, vmi := benchMachine(i)
		for _, o := range []any{vm, vmi} {
			if o == (*virtv1.VirtualMachineInstance)(nil) {
				continue
			}
			u, err := kubevirt.ToUnstructured(o)
			if err != nil {
				b.Fatal(err)
			}
			objs = append(objs, u)
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kubevirt.VMResource:         "VirtualMachineList",
		kubevirt.VMIResource:        "VirtualMachineInstanceList",
		kubevirt.DataVolumeResource: "DataVolumeList",
	}, objs...)
	hash, err := bcrypt.GenerateFromPassword([]byte(benchPassword), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	f := config.File{Users: []config.UserFile{{Username: "admin", PasswordHash: string(hash), Allow: []string{"*"}}}}
	for j := range benchNamespaces {
		f.Allowlist = append(f.Allowlist, config.EntryFile{Namespace: fmt.Sprintf("bench-%d", j)})
	}
	cfg, err := f.Compile()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	client := kubevirt.NewClient(dyn, cfg.Namespaces(), zap.NewNop())
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return New(cfg, client, zap.NewNop())
}

// discard is a ResponseWriter that keeps nothing, so the benchmarks measure the server.
type discard struct {
	h      http.Header
	status int
	n      int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(s int)           { d.status = s }
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discard) reset()                      { clear(d.h); d.status, d.n = 0, 0 }

// serve runs one request through the whole handler (middleware, auth, routing, rendering).
func serve(b *testing.B, s *Server, path string, header map[string]string) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.SetBasicAuth("admin", benchPassword)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := &discard{h: http.Header{}}
	s.ServeHTTP(w, req) // the first request pays bcrypt; the cache serves the rest
	if w.status != http.StatusOK {
		b.Fatalf("GET %s: %d", path, w.status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		s.ServeHTTP(w, req)
	}
	b.SetBytes(int64(w.n))
}

// BenchmarkServeSystem is GET /redfish/v1/Systems/{id} with Basic auth, end to end in
// process: a running worker VM, a running control-plane VM (its health looks at the VMIs on
// its node), a stopped VM.
func BenchmarkServeSystem(b *testing.B) {
	s := benchServer(b, 1000)
	for _, c := range []struct{ name, id string }{
		{"running-worker", "bench-0.vm-00040"},
		{"running-control-plane", "bench-0.vm-00000"},
		{"stopped", "bench-1.vm-00041"},
	} {
		b.Run(c.name+"/identity", func(b *testing.B) { serve(b, s, "/redfish/v1/Systems/"+c.id, nil) })
		b.Run(c.name+"/gzip", func(b *testing.B) {
			serve(b, s, "/redfish/v1/Systems/"+c.id, map[string]string{"Accept-Encoding": "gzip, deflate"})
		})
	}
}

// BenchmarkServeSystemsCollection is GET /redfish/v1/Systems over fleets of growing size.
func BenchmarkServeSystemsCollection(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		s := benchServer(b, n)
		b.Run(fmt.Sprintf("N=%d/identity", n), func(b *testing.B) { serve(b, s, "/redfish/v1/Systems", nil) })
		b.Run(fmt.Sprintf("N=%d/gzip", n), func(b *testing.B) {
			serve(b, s, "/redfish/v1/Systems", map[string]string{"Accept-Encoding": "gzip, deflate"})
		})
	}
}

// BenchmarkRenderSystem is the JSON rendering of one ComputerSystem: the view, then writeJSON
// (marshal, ETag, Link) into a discarding writer.
func BenchmarkRenderSystem(b *testing.B) {
	vm, vmi := benchMachine(0)
	m := kubevirt.Machine{VM: vm, VMI: vmi}
	b.Run("systemResource", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = systemResource(m)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		cs := systemResource(m)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(cs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("writeJSON", func(b *testing.B) {
		w := &discard{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			w.reset()
			writeJSON(w, http.StatusOK, systemResource(m))
		}
	})
}

// BenchmarkAuth is the per-request credential check: Basic credentials the cache has verified
// (an HMAC and a map lookup, never bcrypt), and a wrong password (bcrypt every time).
func BenchmarkAuth(b *testing.B) {
	s := benchServer(b, 1)
	req := httptest.NewRequest(http.MethodGet, "/redfish/v1/Systems", nil)
	req.SetBasicAuth("admin", benchPassword)
	if s.authenticate(req) == nil {
		b.Fatal("not authenticated")
	}
	b.Run("basic/cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.authenticate(req) == nil {
				b.Fatal("not authenticated")
			}
		}
	})
	b.Run("basicAuth.Check/cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.basic.Check("admin", benchPassword) == nil {
				b.Fatal("not authenticated")
			}
		}
	})
	b.Run("basicAuth.Check/bcrypt", func(b *testing.B) {
		for b.Loop() {
			if s.basic.Check("admin", "wrong") != nil {
				b.Fatal("authenticated")
			}
		}
	})
}

// BenchmarkLinkHeader compares the Link header's two ways to find @odata.type: decoding the
// whole body (describedBy) and reading its first members (linkOf, what writeJSON uses).
func BenchmarkLinkHeader(b *testing.B) {
	vm, vmi := benchMachine(0)
	system, err := json.Marshal(systemResource(kubevirt.Machine{VM: vm, VMI: vmi}))
	if err != nil {
		b.Fatal(err)
	}
	uris := make([]string, 10000)
	for i := range uris {
		uris[i] = fmt.Sprintf("/redfish/v1/Systems/bench-%d.vm-%05d", i%10, i)
	}
	coll, err := json.Marshal(redfish.NewCollection(redfish.SystemsURI, redfish.TypeSystemColl, "Computer System Collection", uris))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{{"ComputerSystem", system}, {"Systems-10000", coll}} {
		b.Run(c.name+"/describedBy", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = describedBy(c.body)
			}
		})
		b.Run(c.name+"/linkOf", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = linkOf(c.body)
			}
		})
	}
}
