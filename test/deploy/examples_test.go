package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

// TestExamplesParse: every YAML file under examples/ is well-formed YAML (no duplicate keys),
// and every Kubernetes-style document names its apiVersion, kind and name.
func TestExamplesParse(t *testing.T) {
	root := repoPath(t, "examples")
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return err
		}
		n++
		rel, _ := filepath.Rel(root, p)
		for i, doc := range readYAMLDocs(t, p) {
			required := []string{"apiVersion", "kind", "metadata"}
			switch filepath.Base(rel) {
			case "config.yaml":
				continue // the server's own format, checked by TestExampleConfig
			case "install-config.yaml":
				required = []string{"apiVersion", "metadata"} // the installer needs no kind
			case "kustomization.yaml":
				required = []string{"apiVersion", "kind"}
			}
			for _, k := range required {
				if _, ok := doc[k]; !ok {
					t.Errorf("%s document %d: no %s", rel, i, k)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("found only %d YAML files under examples/", n)
	}
}

// exampleVM is a control-plane VM from examples/vms with what the other examples refer to.
type exampleVM struct {
	vm  *virtv1.VirtualMachine
	mac string
}

func (v exampleVM) id() string { return v.vm.Namespace + "." + v.vm.Name }

// exampleVMs loads examples/vms/*.yaml, decoding VirtualMachines strictly into KubeVirt's types.
func exampleVMs(t testing.TB) (map[string]exampleVM, objects) {
	t.Helper()
	files, err := filepath.Glob(repoPath(t, "examples", "vms", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vms := map[string]exampleVM{}
	var all objects
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, o := range readObjects(t, f) {
			all = append(all, o)
			if o.GetKind() != "VirtualMachine" {
				continue
			}
			vm := &virtv1.VirtualMachine{}
			toTyped(t, o, vm)
			ifaces := vm.Spec.Template.Spec.Domain.Devices.Interfaces
			if len(ifaces) != 1 {
				t.Fatalf("VM %s/%s: want exactly one interface (the machine network), got %d", vm.Namespace, vm.Name, len(ifaces))
			}
			v := exampleVM{vm: vm, mac: strings.ToLower(ifaces[0].MacAddress)}
			vms[v.id()] = v
		}
	}
	if len(vms) != 3 {
		t.Fatalf("want three control-plane VMs in examples/vms, got %d", len(vms))
	}
	return vms, all
}

// TestExampleVMs checks the high-availability rules every control-plane VM follows.
func TestExampleVMs(t *testing.T) {
	vms, all := exampleVMs(t)
	macs, uuids := map[string]string{}, map[string]string{}
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("%s.cp-%d", tenantNS, i)
		v, ok := vms[id]
		if !ok {
			t.Errorf("no VM %s", id)
			continue
		}
		vm := v.vm
		spec := vm.Spec.Template.Spec
		t.Run(vm.Name, func(t *testing.T) {
			wantLabels := map[string]string{"cluster": tenantNS, "role": "control-plane", "redfish.kubevirt.io/expose": "true"}
			if !reflect.DeepEqual(vm.Labels, wantLabels) {
				t.Errorf("labels = %v, want %v", vm.Labels, wantLabels)
			}
			tmplLabels := labels.Set(vm.Spec.Template.ObjectMeta.Labels)
			if tmplLabels["cluster"] != tenantNS || tmplLabels["role"] != "control-plane" {
				t.Errorf("template labels = %v: the virt-launcher pod must carry cluster and role", tmplLabels)
			}

			// Required anti-affinity against the other control-plane VMs of the cluster, per node.
			aff := spec.Affinity
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Fatal("want one requiredDuringScheduling pod anti-affinity term")
			}
			term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
			sel, err := metav1LabelSelector(term.LabelSelector)
			if err != nil || !sel.Matches(tmplLabels) || term.TopologyKey != "kubernetes.io/hostname" ||
				!reflect.DeepEqual(term.LabelSelector.MatchLabels, map[string]string{"cluster": tenantNS, "role": "control-plane"}) {
				t.Errorf("anti-affinity term %+v: want cluster+role on kubernetes.io/hostname", term)
			}

			if spec.EvictionStrategy == nil || *spec.EvictionStrategy != virtv1.EvictionStrategyNone {
				t.Errorf("evictionStrategy = %v, want None", spec.EvictionStrategy)
			}
			if spec.ReadinessProbe == nil || spec.ReadinessProbe.GuestAgentPing == nil {
				t.Error("want readinessProbe.guestAgentPing")
			}

			// Guaranteed QoS: CPU and memory requests equal limits.
			res := spec.Domain.Resources
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, lim := res.Requests[r], res.Limits[r]
				if req.IsZero() || req.Cmp(lim) != 0 {
					t.Errorf("%s request %s != limit %s: not Guaranteed", r, req.String(), lim.String())
				}
			}
			if cpu := spec.Domain.CPU; cpu == nil || resource.NewQuantity(int64(cpu.Sockets*cpu.Cores*cpu.Threads), resource.DecimalSI).Cmp(res.Limits[corev1.ResourceCPU]) != 0 {
				t.Errorf("vCPU topology %+v does not match the CPU limit %v", cpu, res.Limits.Cpu())
			}
			if g := spec.Domain.Memory; g == nil || g.Guest == nil || g.Guest.Cmp(res.Limits[corev1.ResourceMemory]) != 0 {
				t.Errorf("guest memory %v does not match the memory limit %v", g, res.Limits.Memory())
			}

			// Firmware: UEFI without Secure Boot, a fixed UUID.
			fw := spec.Domain.Firmware
			if fw == nil || fw.UUID == "" || fw.Bootloader == nil || fw.Bootloader.EFI == nil ||
				fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot {
				t.Errorf("firmware = %+v: want a UUID and EFI with secureBoot false", fw)
			} else {
				if other, dup := uuids[string(fw.UUID)]; dup {
					t.Errorf("firmware UUID %s also used by %s", fw.UUID, other)
				}
				uuids[string(fw.UUID)] = vm.Name
			}

			if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != virtv1.RunStrategyHalted || vm.Spec.Running != nil {
				t.Errorf("runStrategy = %v, want Halted (and no spec.running)", vm.Spec.RunStrategy)
			}

			// Pinned MAC 02:00:00:00:00:0N.
			if want := fmt.Sprintf("02:00:00:00:00:%02x", i+1); v.mac != want {
				t.Errorf("MAC = %s, want %s", v.mac, want)
			}
			if other, dup := macs[v.mac]; dup {
				t.Errorf("MAC %s also used by %s", v.mac, other)
			}
			macs[v.mac] = vm.Name

			// Every interface is bridged onto a declared network; a Multus network must exist.
			nets := map[string]virtv1.Network{}
			for _, n := range spec.Networks {
				nets[n.Name] = n
			}
			for _, ifc := range spec.Domain.Devices.Interfaces {
				n, ok := nets[ifc.Name]
				if !ok || ifc.Bridge == nil {
					t.Errorf("interface %s: want a bridge binding to a network of the same name", ifc.Name)
					continue
				}
				if n.Multus != nil && !hasObject(all, "NetworkAttachmentDefinition", vm.Namespace, n.Multus.NetworkName) {
					t.Errorf("interface %s: NetworkAttachmentDefinition %s is not in examples/vms", ifc.Name, n.Multus.NetworkName)
				}
				if n.Multus == nil && n.Pod == nil {
					t.Errorf("interface %s: want a pod or Multus network", ifc.Name)
				}
			}

			// Root disk: a blank 120Gi DataVolume from the VM's own template, used by a disk.
			if len(vm.Spec.DataVolumeTemplates) != 1 {
				t.Fatalf("want one dataVolumeTemplate, got %d", len(vm.Spec.DataVolumeTemplates))
			}
			dvt := vm.Spec.DataVolumeTemplates[0]
			if dvt.Spec.Source == nil || dvt.Spec.Source.Blank == nil || dvt.Spec.Storage == nil ||
				dvt.Spec.Storage.Resources.Requests.Storage().Cmp(resource.MustParse("120Gi")) != 0 {
				t.Errorf("dataVolumeTemplate %s: want a blank 120Gi source", dvt.Name)
			}
			disks := map[string]bool{}
			for _, d := range spec.Domain.Devices.Disks {
				disks[d.Name] = true
			}
			used := false
			for _, vol := range spec.Volumes {
				if vol.DataVolume != nil && vol.DataVolume.Name == dvt.Name && disks[vol.Name] {
					used = true
				}
			}
			if !used {
				t.Errorf("DataVolume %s is not a disk of the VM", dvt.Name)
			}
		})
	}
}

func hasObject(objs objects, kind, ns, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return true
		}
	}
	return false
}

// TestExampleVMsPDB: the PDB keeps two of the three control-plane VMs' virt-launcher pods.
func TestExampleVMsPDB(t *testing.T) {
	vms, all := exampleVMs(t)
	var pdb policyv1.PodDisruptionBudget
	toTyped(t, all.one(t, "PodDisruptionBudget"), &pdb)
	if pdb.Namespace != tenantNS || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB %s/%s minAvailable %v: want minAvailable 2 in %s", pdb.Namespace, pdb.Name, pdb.Spec.MinAvailable, tenantNS)
	}
	sel, err := metav1LabelSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("PDB selector %v: %v", pdb.Spec.Selector, err)
	}
	for id, v := range vms {
		if !sel.Matches(labels.Set(v.vm.Spec.Template.ObjectMeta.Labels)) {
			t.Errorf("PDB does not select the virt-launcher pod of %s", id)
		}
	}
	// ... and nothing that is not a control-plane VM of the cluster.
	if sel.Matches(labels.Set{"cluster": tenantNS, "role": "worker"}) {
		t.Error("PDB selects worker pods too")
	}
}

// TestExampleVMsKustomization: `kubectl apply -k examples/vms` applies every manifest there.
func TestExampleVMsKustomization(t *testing.T) {
	_, all := exampleVMs(t)
	rendered := kustomizeBuild(t, repoPath(t, "examples", "vms"))
	if !reflect.DeepEqual(rendered.kindCounts(), all.kindCounts()) {
		t.Errorf("kustomize build examples/vms = %v, files hold %v", rendered.kindCounts(), all.kindCounts())
	}
}

func loadExampleConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Load(repoPath(t, "examples", "config.yaml"))
	if err != nil {
		t.Fatalf("config.Load(examples/config.yaml): %v", err)
	}
	return cfg
}

// TestExampleConfig: the example config exposes exactly the example VMs, to a user who may
// drive them.
func TestExampleConfig(t *testing.T) {
	cfg := loadExampleConfig(t)
	data, err := os.ReadFile(repoPath(t, "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(data); err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	vms, _ := exampleVMs(t)
	for id, v := range vms {
		if !cfg.Exposed(v.vm.Namespace, v.vm.Name, v.vm.Labels) {
			t.Errorf("%s is not exposed by examples/config.yaml", id)
		}
		// Without the expose label, the same VM is not a BMC.
		lbls := maps(v.vm.Labels)
		delete(lbls, "redfish.kubevirt.io/expose")
		if cfg.Exposed(v.vm.Namespace, v.vm.Name, lbls) {
			t.Errorf("%s is exposed without the redfish.kubevirt.io/expose label", id)
		}
	}
	if cfg.Exposed("tenant-b", "cp-0", map[string]string{"redfish.kubevirt.io/expose": "true"}) {
		t.Error("a VM of another namespace is exposed")
	}
	u := cfg.Users["tenant-a-installer"]
	if u == nil || !u.MayWrite() {
		t.Fatal("examples/config.yaml: user tenant-a-installer missing or read-only")
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// bmcAccess is what Metal3 (baremetal-operator, pkg/hardwareutils/bmc) makes of a BMC address
// for Ironic's redfish driver.
type bmcAccess struct {
	Driver          string // Ironic hardware type
	BootInterface   string
	RedfishAddress  string // driver_info redfish_address
	RedfishSystemID string // driver_info redfish_system_id ("" = the only system)
}

// parseBMCAddress follows Metal3's rules: the URL scheme is "<type>[+<http|https>]"; for the
// redfish types the address is transport://host[:port] (https by default) and the system id
// is the URL path verbatim. Only the Redfish types this project serves are accepted.
func parseBMCAddress(addr string) (bmcAccess, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return bmcAccess{}, err
	}
	if u.Scheme == "" || u.Opaque != "" || u.Host == "" {
		return bmcAccess{}, fmt.Errorf("%q: want <type>+https://host/path", addr)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return bmcAccess{}, fmt.Errorf("%q: Metal3 keeps only scheme, host and path", addr)
	}
	// Metal3 checks the host name against the DNS label rules (or accepts an IP).
	dnsName := regexp.MustCompile(`^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])\.)*([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])$`)
	if net.ParseIP(u.Hostname()) == nil && !dnsName.MatchString(u.Hostname()) {
		return bmcAccess{}, fmt.Errorf("%q: invalid host name", addr)
	}
	typ, transport, hasTransport := strings.Cut(u.Scheme, "+")
	if !hasTransport {
		transport = "https"
	}
	if transport != "http" && transport != "https" {
		return bmcAccess{}, fmt.Errorf("%q: unknown transport %q", addr, transport)
	}
	a := bmcAccess{Driver: "redfish", RedfishAddress: transport + "://" + u.Host}
	switch typ {
	case "redfish-virtualmedia":
		a.BootInterface = "redfish-virtual-media"
		a.RedfishSystemID = u.Path
	case "redfish":
		a.BootInterface = "ipxe"
		if p := strings.Trim(u.Path, "/"); p != "" && p != "redfish/v1" {
			a.RedfishSystemID = u.Path
		}
	default:
		return bmcAccess{}, fmt.Errorf("%q: BMC type %q is not a Redfish type", addr, typ)
	}
	return a, nil
}

func TestParseBMCAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bmcAccess
		err  bool
	}{
		{"redfish-virtualmedia+https://bmc.example.com/redfish/v1/Systems/ns.vm", bmcAccess{"redfish", "redfish-virtual-media", "https://bmc.example.com", "/redfish/v1/Systems/ns.vm"}, false},
		{"redfish-virtualmedia://bmc.example.com:8443/redfish/v1/Systems/ns.vm.x", bmcAccess{"redfish", "redfish-virtual-media", "https://bmc.example.com:8443", "/redfish/v1/Systems/ns.vm.x"}, false},
		{"redfish-virtualmedia+http://10.0.0.1:8000/redfish/v1/Systems/ns.vm", bmcAccess{"redfish", "redfish-virtual-media", "http://10.0.0.1:8000", "/redfish/v1/Systems/ns.vm"}, false},
		{"redfish+https://bmc.example.com/redfish/v1/", bmcAccess{"redfish", "ipxe", "https://bmc.example.com", ""}, false},
		{"ipmi://10.0.0.1", bmcAccess{}, true},
		{"redfish-virtualmedia+ftp://bmc/redfish/v1/Systems/a.b", bmcAccess{}, true},
		{"bmc.example.com", bmcAccess{}, true},
		{"redfish-virtualmedia+https://bad_host/redfish/v1/Systems/a.b", bmcAccess{}, true},
	} {
		got, err := parseBMCAddress(tc.addr)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseBMCAddress(%q) = %+v, %v; want %+v, error %v", tc.addr, got, err, tc.want, tc.err)
		}
	}
}

// bmcHost is one host of an installer example: its BMC, boot MAC and credentials.
type bmcHost struct {
	where    string // file and field, for messages
	address  string
	bootMAC  string
	username string
	password string
}

// installerHosts extracts the BMC hosts from each installer example, the way each format
// nests them; credentials held in Secrets are resolved from the same file.
func installerHosts(t *testing.T) map[string][]bmcHost {
	t.Helper()
	out := map[string][]bmcHost{}
	secrets := func(file string) map[string]map[string]string { // "ns/name" -> stringData
		m := map[string]map[string]string{}
		for _, d := range readYAMLDocs(t, repoPath(t, "examples", file)) {
			if d["kind"] == "Secret" {
				data := map[string]string{}
				sd, _ := d["stringData"].(map[string]any)
				for k, v := range sd {
					data[k], _ = v.(string)
				}
				m[str(t, d, "metadata", "namespace")+"/"+str(t, d, "metadata", "name")] = data
			}
		}
		return m
	}
	credsFrom := func(file string, h *bmcHost, ns, name string) {
		s, ok := secrets(file)[ns+"/"+name]
		if !ok {
			t.Errorf("%s: BMC Secret %s/%s is not in %s", h.where, ns, name, file)
			return
		}
		h.username, h.password = s["username"], s["password"]
	}

	// install-config.yaml: platform.baremetal.hosts[].bmc
	ic := readYAMLDocs(t, repoPath(t, "examples", "install-config.yaml"))[0]
	for i, h := range list(t, ic, "platform", "baremetal", "hosts") {
		out["install-config.yaml"] = append(out["install-config.yaml"], bmcHost{
			where:    fmt.Sprintf("install-config.yaml hosts[%d]", i),
			address:  str(t, h, "bmc", "address"),
			bootMAC:  str(t, h, "bootMACAddress"),
			username: str(t, h, "bmc", "username"),
			password: str(t, h, "bmc", "password"),
		})
	}

	// siteconfig.yaml: spec.clusters[].nodes[] with bmcCredentialsName in the SiteConfig's namespace.
	for _, d := range readYAMLDocs(t, repoPath(t, "examples", "siteconfig.yaml")) {
		if d["kind"] != "SiteConfig" {
			continue
		}
		if d["apiVersion"] != "ran.openshift.io/v1" {
			t.Errorf("SiteConfig apiVersion = %v", d["apiVersion"])
		}
		ns := str(t, d, "metadata", "namespace")
		for c, cl := range list(t, d, "spec", "clusters") {
			for i, n := range list(t, cl, "nodes") {
				h := bmcHost{
					where:   fmt.Sprintf("siteconfig.yaml clusters[%d].nodes[%d]", c, i),
					address: str(t, n, "bmcAddress"),
					bootMAC: str(t, n, "bootMACAddress"),
				}
				credsFrom("siteconfig.yaml", &h, ns, str(t, n, "bmcCredentialsName", "name"))
				out["siteconfig.yaml"] = append(out["siteconfig.yaml"], h)
			}
		}
	}

	// clusterinstance.yaml: spec.nodes[].
	for _, d := range readYAMLDocs(t, repoPath(t, "examples", "clusterinstance.yaml")) {
		if d["kind"] != "ClusterInstance" {
			continue
		}
		if d["apiVersion"] != "siteconfig.open-cluster-management.io/v1alpha1" {
			t.Errorf("ClusterInstance apiVersion = %v", d["apiVersion"])
		}
		ns := str(t, d, "metadata", "namespace")
		for i, n := range list(t, d, "spec", "nodes") {
			h := bmcHost{
				where:   fmt.Sprintf("clusterinstance.yaml nodes[%d]", i),
				address: str(t, n, "bmcAddress"),
				bootMAC: str(t, n, "bootMACAddress"),
			}
			credsFrom("clusterinstance.yaml", &h, ns, str(t, n, "bmcCredentialsName", "name"))
			if len(list(t, n, "templateRefs")) == 0 {
				t.Errorf("%s: templateRefs is required", h.where)
			}
			out["clusterinstance.yaml"] = append(out["clusterinstance.yaml"], h)
		}
	}

	// baremetalhost.yaml: BareMetalHost spec.bmc with credentialsName in the host's namespace.
	for _, d := range readYAMLDocs(t, repoPath(t, "examples", "baremetalhost.yaml")) {
		if d["kind"] != "BareMetalHost" {
			continue
		}
		if d["apiVersion"] != "metal3.io/v1alpha1" {
			t.Errorf("BareMetalHost apiVersion = %v", d["apiVersion"])
		}
		if online, _ := dig(d, "spec", "online"); online != true {
			t.Errorf("BareMetalHost %v: want spec.online true", d["metadata"])
		}
		h := bmcHost{
			where:   "baremetalhost.yaml " + str(t, d, "metadata", "name"),
			address: str(t, d, "spec", "bmc", "address"),
			bootMAC: str(t, d, "spec", "bootMACAddress"),
		}
		credsFrom("baremetalhost.yaml", &h, str(t, d, "metadata", "namespace"), str(t, d, "spec", "bmc", "credentialsName"))
		out["baremetalhost.yaml"] = append(out["baremetalhost.yaml"], h)
	}
	return out
}

// TestInstallerBMCs: every BMC address in the installer examples, parsed as Metal3 does,
// names a system of an example VM that the example config exposes; the boot MAC is that VM's
// pinned MAC; and the credentials log in as a user who may drive it.
func TestInstallerBMCs(t *testing.T) {
	vms, _ := exampleVMs(t)
	cfg := loadExampleConfig(t)
	route := kustomizeBuild(t, repoPath(t, "deploy", "overlays", "openshift")).one(t, "Route")
	subdomain := str(t, route.Object, "spec", "subdomain")
	var ingressHost string
	for _, o := range kustomizeBuild(t, repoPath(t, "deploy", "overlays", "kubernetes")).ofKind("Ingress") {
		ingressHost = str(t, o.Object, "spec", "rules", 0, "host")
	}

	files := installerHosts(t)
	for _, f := range []string{"install-config.yaml", "siteconfig.yaml", "clusterinstance.yaml", "baremetalhost.yaml"} {
		hosts := files[f]
		seen := map[string]bool{}
		for _, h := range hosts {
			a, err := parseBMCAddress(h.address)
			if err != nil {
				t.Errorf("%s: %v", h.where, err)
				continue
			}
			if a.BootInterface != "redfish-virtual-media" || !strings.HasPrefix(a.RedfishAddress, "https://") {
				t.Errorf("%s: %s gives boot interface %s at %s, want redfish-virtual-media over https", h.where, h.address, a.BootInterface, a.RedfishAddress)
			}
			// The address is the Route (subdomain kubevirt-redfish of the ingress domain) and
			// the Ingress host of the Kubernetes overlay.
			host := strings.TrimPrefix(a.RedfishAddress, "https://")
			if !strings.HasPrefix(host, subdomain+".") || host != ingressHost {
				t.Errorf("%s: BMC host %s is neither the Route (%s.<domain>) nor the Ingress host %s", h.where, host, subdomain, ingressHost)
			}
			id, ok := strings.CutPrefix(a.RedfishSystemID, "/redfish/v1/Systems/")
			if !ok || id == "" || strings.Contains(id, "/") {
				t.Errorf("%s: redfish_system_id %q is not /redfish/v1/Systems/<id>", h.where, a.RedfishSystemID)
				continue
			}
			ns, name, ok := strings.Cut(id, ".") // namespaces have no dots: the first one splits
			v, exists := vms[id]
			if !ok || !exists {
				t.Errorf("%s: system %s is not a VM in examples/vms", h.where, id)
				continue
			}
			seen[id] = true
			if !cfg.Exposed(ns, name, v.vm.Labels) {
				t.Errorf("%s: examples/config.yaml does not expose %s", h.where, id)
			}
			if strings.ToLower(h.bootMAC) != v.mac {
				t.Errorf("%s: bootMACAddress %s, but %s has MAC %s", h.where, h.bootMAC, id, v.mac)
			}
			u := cfg.Users[h.username]
			switch {
			case u == nil:
				t.Errorf("%s: user %q is not in examples/config.yaml", h.where, h.username)
			case bcrypt.CompareHashAndPassword(u.Hash, []byte(h.password)) != nil:
				t.Errorf("%s: the password does not match user %s's passwordHash", h.where, h.username)
			case !u.MaySee(ns, name, v.vm.Labels) || !u.MayWrite():
				t.Errorf("%s: user %s may not drive %s", h.where, h.username, id)
			}
			if !strings.Contains(h.password, "CHANGE-ME") {
				t.Errorf("%s: example passwords must be marked CHANGE-ME", h.where)
			}
		}
		if len(seen) != len(vms) || len(hosts) != len(vms) {
			t.Errorf("%s: %d hosts naming %d distinct VMs, want each of the %d VMs once", f, len(hosts), len(seen), len(vms))
		}
	}
}

// TestAgentConfig: the Agent-based Installer hosts are the example VMs (by MAC), and the
// rendezvous host is one of them.
func TestAgentConfig(t *testing.T) {
	vms, _ := exampleVMs(t)
	vmMACs := map[string]bool{}
	for _, v := range vms {
		vmMACs[v.mac] = true
	}
	doc := readYAMLDocs(t, repoPath(t, "examples", "agent-config.yaml"))[0]
	if doc["apiVersion"] != "v1beta1" || doc["kind"] != "AgentConfig" {
		t.Errorf("agent-config.yaml is %v %v, want v1beta1 AgentConfig", doc["apiVersion"], doc["kind"])
	}
	rendezvous := str(t, doc, "rendezvousIP")
	seen := map[string]bool{}
	rendezvousFound := false
	for i, h := range list(t, doc, "hosts") {
		ifaces := list(t, h, "interfaces")
		if len(ifaces) != 1 {
			t.Errorf("hosts[%d]: want one interface", i)
			continue
		}
		mac := strings.ToLower(str(t, ifaces[0], "macAddress"))
		if !vmMACs[mac] {
			t.Errorf("hosts[%d]: MAC %s is no example VM's", i, mac)
		}
		seen[mac] = true
		// The nmstate interface is the same NIC (same name and MAC).
		nm := list(t, h, "networkConfig", "interfaces")[0]
		if str(t, nm, "name") != str(t, ifaces[0], "name") || strings.ToLower(str(t, nm, "mac-address")) != mac {
			t.Errorf("hosts[%d]: networkConfig interface %v does not match %v", i, nm, ifaces[0])
		}
		for _, a := range list(t, nm, "ipv4", "address") {
			if str(t, a, "ip") == rendezvous {
				rendezvousFound = true
			}
		}
	}
	if len(seen) != len(vms) {
		t.Errorf("agent-config.yaml names %d of the %d VMs", len(seen), len(vms))
	}
	if !rendezvousFound {
		t.Errorf("rendezvousIP %s is not a host's static address", rendezvous)
	}

	// install-config.yaml: the VIPs are on the machine network, one host per control-plane replica.
	ic := readYAMLDocs(t, repoPath(t, "examples", "install-config.yaml"))[0]
	_, machineNet, err := net.ParseCIDR(str(t, ic, "networking", "machineNetwork", 0, "cidr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVIPs", "ingressVIPs"} {
		for _, vip := range list(t, ic, "platform", "baremetal", k) {
			if ip := net.ParseIP(vip.(string)); ip == nil || !machineNet.Contains(ip) {
				t.Errorf("install-config.yaml %s %v is not in the machine network %s", k, vip, machineNet)
			}
		}
	}
	if !machineNet.Contains(net.ParseIP(rendezvous)) {
		t.Errorf("rendezvousIP %s is not in the machine network %s", rendezvous, machineNet)
	}
	if r, _ := dig(ic, "controlPlane", "replicas"); r != len(vms) || len(list(t, ic, "platform", "baremetal", "hosts")) != len(vms) {
		t.Errorf("install-config.yaml: controlPlane.replicas %v and hosts should both be %d", r, len(vms))
	}
}

// TestCurlWalkthrough: the walkthrough drives an exposed example VM with the example user.
func TestCurlWalkthrough(t *testing.T) {
	data, err := os.ReadFile(repoPath(t, "examples", "curl-walkthrough.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	m := regexp.MustCompile(`(?m)^SYS=\$BMC/redfish/v1/Systems/(\S+)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no SYS=$BMC/redfish/v1/Systems/<id> line")
	}
	vms, _ := exampleVMs(t)
	v, ok := vms[m[1]]
	if !ok {
		t.Fatalf("the walkthrough drives %s, which is not in examples/vms", m[1])
	}
	a := regexp.MustCompile(`(?m)^AUTH='([^:]+):([^']+)'`).FindStringSubmatch(doc)
	if a == nil {
		t.Fatal("no AUTH='user:password' line")
	}
	cfg := loadExampleConfig(t)
	u := cfg.Users[a[1]]
	if u == nil || bcrypt.CompareHashAndPassword(u.Hash, []byte(a[2])) != nil || !u.MaySee(v.vm.Namespace, v.vm.Name, v.vm.Labels) {
		t.Errorf("the walkthrough's credentials %s do not let it drive %s with examples/config.yaml", a[1], m[1])
	}
	for _, want := range []string{
		"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		"/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia",
		`"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"`,
		`{"ResetType":"On"}`, `{"ResetType":"ForceOff"}`, "PowerState",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the walkthrough lacks %s", want)
		}
	}
}
