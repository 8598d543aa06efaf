package kubevirt

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseSystemID checks the system id parser against any URL segment: what it accepts
// names exactly one valid namespace and VM, and SystemID gives the same id back. Seeds are ids
// as metal3 and the installers write them (redfish_system_id=/redfish/v1/Systems/<id>).
func FuzzParseSystemID(f *testing.F) {
	for _, id := range []string{
		"tenant-a.cp-0", "tenant-a.cp.0", "openshift-cnv.master-0.ocp.example.com", "ns.worker.rack-1.example",
		"a.b", "0.1", strings.Repeat("n", 63) + ".vm", "ns." + strings.Repeat("v", 253), "", ".", "tenant-a",
		".cp-0", "tenant-a.", "tenant-a..cp", "Tenant-A.cp-0", "tenant_a.cp-0", "tenant-a.cp/0", "tenant-a.%2e%2e",
		"tenant-a.cp-0/", "tenant-a.cp-0?x=1", "tenant-a.cp-0\x00", "tenant-a.ср-0", "ns." + strings.Repeat("v", 254),
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ns, name, ok := ParseSystemID(id)
		if !ok {
			if ns != "" || name != "" {
				t.Fatalf("refused %q but returned %q/%q", id, ns, name)
			}
			return
		}
		if SystemID(ns, name) != id {
			t.Fatalf("%q parses to %q/%q, which prints as %q", id, ns, name, SystemID(ns, name))
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("accepted namespace %q: %v", ns, errs)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("accepted VM name %q: %v", name, errs)
		}
		if strings.ContainsAny(id, "/?#%\\ \x00") {
			t.Fatalf("accepted an id with URL syntax: %q", id)
		}
	})
}

// FuzzSystemIDRoundTrip: every valid namespace and VM name pair survives SystemID and back.
func FuzzSystemIDRoundTrip(f *testing.F) {
	f.Add("tenant-a", "cp-0")
	f.Add("tenant-a", "master-0.ocp.example.com")
	f.Add("a", "b")
	f.Fuzz(func(t *testing.T, ns, name string) {
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return
		}
		gotNS, gotName, ok := ParseSystemID(SystemID(ns, name))
		if !ok || gotNS != ns || gotName != name {
			t.Fatalf("%q/%q comes back as %q/%q (%v)", ns, name, gotNS, gotName, ok)
		}
	})
}
