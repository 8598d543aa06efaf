package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

const invVM = "tenant-a.inv-0"

func sys(id string) string { return "/redfish/v1/Systems/" + id }

// storageVM is a VM with the disks a real cluster has: a root disk from a dataVolumeTemplate,
// a PVC made by a DataVolume, an emptyDisk, an installer CD-ROM on a DataVolume and a
// cloud-init disk.
func storageVM() *virtv1.VirtualMachine {
	vm := sim.ControlPlaneVM("tenant-a", "inv-0", 30)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "root", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
		{Name: "data", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusSATA}}},
		{Name: "scratch", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
		{Name: "installer", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}},
		{Name: "cloudinit", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
	}
	spec.Volumes = []virtv1.Volume{
		{Name: "root", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "inv-0-root"}}},
		{Name: "data", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: k8sv1.PersistentVolumeClaimVolumeSource{ClaimName: "inv-0-data"}}}},
		{Name: "scratch", VolumeSource: virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("2Gi")}}},
		{Name: "installer", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "inv-0-iso"}}},
		{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
	}
	vm.Spec.DataVolumeTemplates = []virtv1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: "inv-0-root"},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: k8sv1.VolumeResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse("120Gi")}}},
		},
	}}
	return vm
}

func testDataVolume(name, size string) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-a"},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			PVC: &k8sv1.PersistentVolumeClaimSpec{Resources: k8sv1.VolumeResourceRequirements{
				Requests: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse(size)}}},
		},
	}
}

// addStorageVM creates storageVM and the DataVolumes of its data disk and installer.
func (h *harness) addStorageVM() {
	h.t.Helper()
	ctx := context.Background()
	for _, dv := range []*cdiv1.DataVolume{testDataVolume("inv-0-data", "8Gi"), testDataVolume("inv-0-iso", "10Gi")} {
		u, err := kubevirt.ToUnstructured(dv)
		require.NoError(h.t, err)
		_, err = h.dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(h.t, err)
	}
	u, err := sim.ToUnstructured(storageVM())
	require.NoError(h.t, err)
	_, err = h.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(h.t, err)
	h.eventually("the storage VM and its DataVolumes in the caches", func() bool {
		_, ok := h.client.Get("tenant-a", "inv-0")
		_, ok1 := h.client.DataVolume("tenant-a", "inv-0-data")
		_, ok2 := h.client.DataVolume("tenant-a", "inv-0-iso")
		return ok && ok1 && ok2
	})
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(pollFor)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func link(doc map[string]any, key string) string {
	l, _ := doc[key].(map[string]any)
	s, _ := l["@odata.id"].(string)
	return s
}

func memberIDs(doc map[string]any) []string {
	var out []string
	ms, _ := doc["Members"].([]any)
	for _, m := range ms {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	return out
}

func TestSystemLinksEveryInventoryResource(t *testing.T) {
	h := newHarness(t, false)
	doc := h.getJSON(sys(cpA0), "admin")
	for key, typ := range map[string]string{
		"Processors":         redfish.TypeProcessorColl,
		"EthernetInterfaces": redfish.TypeEthernetInterfaceColl,
		"SimpleStorage":      redfish.TypeSimpleStorageColl,
		"Storage":            redfish.TypeStorageColl,
		"SecureBoot":         redfish.TypeSecureBoot,
		"Bios":               redfish.TypeBios,
	} {
		uri := link(doc, key)
		assert.Equal(t, sys(cpA0)+"/"+key, uri, key)
		assert.Equal(t, typ, h.getJSON(uri, "viewer")["@odata.type"], key)
	}
	assert.Equal(t, "KubeVirt UEFI", doc["BiosVersion"])
	assert.Equal(t, "Off", doc["IndicatorLED"])
	assert.Equal(t, false, doc["LocationIndicatorActive"])
	assert.ElementsMatch(t, []any{"Lit", "Blinking", "Off"}, doc["IndicatorLED@Redfish.AllowableValues"])
	assert.ElementsMatch(t, []any{"IndicatorLED", "LocationIndicatorActive"}, doc["@Redfish.WriteableProperties"])
	links := doc["Links"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Managers/" + cpA0}}, links["ManagedBy"])
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Chassis/" + cpA0}}, links["Chassis"])
	// The manager and chassis point back at the system.
	mgr := h.getJSON("/redfish/v1/Managers/"+cpA0, "admin")["Links"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"@odata.id": sys(cpA0)}}, mgr["ManagerForServers"])
	ch := h.getJSON("/redfish/v1/Chassis/"+cpA0, "admin")["Links"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"@odata.id": sys(cpA0)}}, ch["ComputerSystems"])

	// Another tenant's inventory is as invisible as its system.
	resp, body := h.do(http.MethodGet, sys(cpB0)+"/Processors", "alice", "", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	resp, _ = h.do(http.MethodGet, sys(cpA0)+"/Bios", "", "", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestProcessorsOverHTTP(t *testing.T) {
	h := newHarness(t, false)
	coll := h.getJSON(sys(cpA0)+"/Processors", "admin")
	assert.Equal(t, []string{sys(cpA0) + "/Processors/0"}, memberIDs(coll), "one member per socket")
	assert.Equal(t, float64(1), coll["Members@odata.count"])
	p := h.getJSON(sys(cpA0)+"/Processors/0", "admin")
	assert.Equal(t, redfish.TypeProcessor, p["@odata.type"])
	assert.Equal(t, "CPU", p["ProcessorType"])
	assert.Equal(t, "x86", p["ProcessorArchitecture"])
	assert.Equal(t, "x86-64", p["InstructionSet"])
	assert.Equal(t, float64(4), p["TotalCores"])
	assert.Equal(t, float64(4), p["TotalThreads"])
	assert.NotContains(t, p, "Model", "the demo VM names no CPU model")
	assert.NotContains(t, p, "Manufacturer", "the host's CPU vendor is not the VM's to tell")
	assert.Equal(t, map[string]any{"State": "Enabled", "Health": "OK"}, p["Status"])
	for _, bad := range []string{"1", "CPU0", "x"} {
		resp, body := h.do(http.MethodGet, sys(cpA0)+"/Processors/"+bad, "admin", "", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	}
}

func TestEthernetInterfacesOverHTTP(t *testing.T) {
	h := newHarness(t, true)
	coll := h.getJSON(sys(cpA0)+"/EthernetInterfaces", "admin")
	assert.Equal(t, []string{sys(cpA0) + "/EthernetInterfaces/default"}, memberIDs(coll))
	nic := h.getJSON(sys(cpA0)+"/EthernetInterfaces/default", "admin")
	assert.Equal(t, "default", nic["Id"])
	assert.Equal(t, "02:00:00:00:00:01", nic["MACAddress"])
	assert.Equal(t, "02:00:00:00:00:01", nic["PermanentMACAddress"])
	assert.Equal(t, map[string]any{"State": "Enabled", "Health": "OK"}, nic["Status"], "Ironic enrolls Enabled/OK interfaces")
	assert.Equal(t, "LinkDown", nic["LinkStatus"])
	assert.Equal(t, []any{}, nic["IPv4Addresses"])
	assert.Equal(t, "/redfish/v1/Chassis/"+cpA0, link(nic["Links"].(map[string]any), "Chassis"))

	h.powerOn(cpA0)
	h.eventually("the link up", func() bool {
		return h.getJSON(sys(cpA0)+"/EthernetInterfaces/default", "admin")["LinkStatus"] == "LinkUp"
	})
	resp, body := h.do(http.MethodGet, sys(cpA0)+"/EthernetInterfaces/nope", "admin", "", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
}

func TestStorageOverHTTP(t *testing.T) {
	h := newHarness(t, false)
	h.addStorageVM()
	base := sys(invVM)

	ss := h.getJSON(base+"/SimpleStorage/1", "admin")
	type device struct {
		Name          string
		CapacityBytes *int64
		Status        redfish.Status
	}
	var devs []device
	raw, _ := json.Marshal(ss["Devices"])
	require.NoError(t, json.Unmarshal(raw, &devs))
	i64 := func(n int64) *int64 { return &n }
	assert.Equal(t, []device{
		{"root", i64(120 << 30), enabledOK},
		{"data", i64(8 << 30), enabledOK},
		{"scratch", i64(2 << 30), enabledOK},
		{"installer (CD-ROM)", nil, enabledOK},
		{"cloudinit", nil, enabledOK},
	}, devs, "the root disk from its dataVolumeTemplate, the PVC from its DataVolume, no CD-ROM capacity")
	assert.Equal(t, []string{base + "/SimpleStorage/1"}, memberIDs(h.getJSON(base+"/SimpleStorage", "admin")))

	st := h.getJSON(base+"/Storage/1", "admin")
	assert.Equal(t, []string{base + "/Storage/1"}, memberIDs(h.getJSON(base+"/Storage", "admin")))
	var drives []string
	for _, d := range st["Drives"].([]any) {
		drives = append(drives, d.(map[string]any)["@odata.id"].(string))
	}
	assert.Equal(t, []string{"/redfish/v1/Chassis/" + invVM + "/Drives/root", "/redfish/v1/Chassis/" + invVM + "/Drives/data", "/redfish/v1/Chassis/" + invVM + "/Drives/scratch"}, drives,
		"only drives with a known size: sushy cannot sort a missing one")
	assert.Equal(t, float64(3), st["Drives@odata.count"])

	drive := "/redfish/v1/Chassis/" + invVM + "/Drives/"
	root := h.getJSON(drive+"root", "admin")
	assert.Equal(t, float64(120<<30), root["CapacityBytes"])
	assert.Contains(t, root, "MediaType")
	assert.Nil(t, root["MediaType"], "HDD or SSD: unknown for a virtual disk")
	assert.Nil(t, root["Protocol"], "virtio has no Redfish protocol")
	assert.Equal(t, "SATA", h.getJSON(drive+"data", "admin")["Protocol"])
	assert.Equal(t, []any{map[string]any{"@odata.id": base + "/Storage/1/Volumes/root"}}, root["Links"].(map[string]any)["Volumes"])

	vols := h.getJSON(base+"/Storage/1/Volumes", "admin")
	assert.Equal(t, []string{base + "/Storage/1/Volumes/root", base + "/Storage/1/Volumes/data", base + "/Storage/1/Volumes/scratch"}, memberIDs(vols))
	assert.Equal(t, map[string]any{"@odata.type": redfish.TypeOperationApplyTimeSupport, "SupportedValues": []any{}}, vols["@Redfish.OperationApplyTimeSupport"])
	v := h.getJSON(base+"/Storage/1/Volumes/data", "admin")
	assert.Equal(t, float64(8<<30), v["CapacityBytes"])
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Chassis/" + invVM + "/Drives/data"}}, v["Links"].(map[string]any)["Drives"])

	ctrls := h.getJSON(base+"/Storage/1/Controllers", "admin")
	assert.Equal(t, []string{base + "/Storage/1/Controllers/virtio", base + "/Storage/1/Controllers/sata"}, memberIDs(ctrls))
	sata := h.getJSON(base+"/Storage/1/Controllers/sata", "admin")
	assert.Equal(t, []any{}, sata["SupportedRAIDTypes"])
	assert.Equal(t, []any{"SATA"}, sata["SupportedDeviceProtocols"])

	for _, missing := range []string{base + "/Storage/2", drive + "installer", drive + "cloudinit", base + "/Storage/1/Volumes/installer",
		base + "/Storage/1/Controllers/usb", base + "/SimpleStorage/2", base + "/Storage/1/Drives/root", "/redfish/v1/Chassis/" + cpB0 + "/Drives/root"} {
		resp, body := h.do(http.MethodGet, missing, "admin", "", nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", missing, body)
	}
	resp, body := h.do(http.MethodGet, drive+"root", "alice", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	// The demo VMs' root disk comes from a 120 GiB DataVolume template.
	demo := h.getJSON(sys(cpA0)+"/Storage/1", "admin")
	assert.Equal(t, []any{map[string]any{"@odata.id": "/redfish/v1/Chassis/" + cpA0 + "/Drives/rootdisk"}}, demo["Drives"])
	assert.Equal(t, float64(120<<30), h.getJSON("/redfish/v1/Chassis/"+cpA0+"/Drives/rootdisk", "admin")["CapacityBytes"])
	assert.NotEmpty(t, memberIDs(h.getJSON(sys(cpA0)+"/Storage/1/Controllers", "admin")), "never an empty controller list for a VM with disks")
}

func TestBiosOverHTTP(t *testing.T) {
	h := newHarness(t, false)
	b := h.getJSON(sys(cpA0)+"/Bios", "admin")
	assert.Equal(t, map[string]any{"BootMode": "Uefi", "SecureBoot": "Disabled", "PersistentEfiVariables": "Disabled"}, b["Attributes"])
	assert.Equal(t, map[string]any{
		"@odata.type":         redfish.TypeSettings,
		"SettingsObject":      map[string]any{"@odata.id": sys(cpA0) + "/Bios/Settings"},
		"SupportedApplyTimes": []any{"OnReset"},
		"Messages":            []any{},
	}, b["@Redfish.Settings"])
	assert.NotContains(t, h.getJSON(sys(cpA0), "admin"), "@Redfish.Settings", "never on the ComputerSystem: sushy would PATCH it for boot changes")
	resp, _ := h.do(http.MethodPatch, sys(cpA0)+"/Bios", "admin", `{"Attributes":{"BootMode":"Bios"}}`, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "changes go to the settings object")
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	pending := h.getJSON(sys(cpA0)+"/Bios/Settings", "admin")
	assert.Equal(t, b["Attributes"], pending["Attributes"])
	assert.Equal(t, redfish.TypeBios, pending["@odata.type"])

	// The boot mode set on the ComputerSystem shows in both.
	h.patchBoot(cpA0, `{"BootSourceOverrideMode":"Legacy"}`)
	b = h.getJSON(sys(cpA0)+"/Bios", "admin")
	assert.Equal(t, map[string]any{"BootMode": "Bios", "SecureBoot": "Disabled"}, b["Attributes"])
	assert.Equal(t, "KubeVirt BIOS", h.getJSON(sys(cpA0), "admin")["BiosVersion"])
}

func TestBiosSettingsPatchValidation(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		name, body string
		ids        []string
	}{
		{"empty", `{}`, []string{"EmptyJSON"}},
		{"empty attributes", `{"Attributes":{}}`, []string{"EmptyJSON"}},
		{"apply time alone", `{"@Redfish.SettingsApplyTime":{"ApplyTime":"OnReset"}}`, []string{"EmptyJSON"}},
		{"attributes not an object", `{"Attributes":[]}`, []string{"PropertyValueTypeError"}},
		{"bad boot mode", `{"Attributes":{"BootMode":"Legacy"}}`, []string{"PropertyValueNotInList"}},
		{"bad secure boot", `{"Attributes":{"SecureBoot":true}}`, []string{"PropertyValueTypeError"}},
		{"read-only attribute", `{"Attributes":{"MachineType":"pc"}}`, []string{"PropertyNotWritable"}},
		{"unknown attribute", `{"Attributes":{"ProcTurboMode":"Enabled"}}`, []string{"PropertyUnknown"}},
		{"read-only property", `{"Name":"x","Attributes":{"BootMode":"Uefi"}}`, []string{"PropertyNotWritable"}},
		{"unknown property", `{"Password":"x"}`, []string{"PropertyUnknown"}},
		{"immediate apply", `{"Attributes":{"BootMode":"Uefi"},"@Redfish.SettingsApplyTime":{"ApplyTime":"Immediate"}}`, []string{"PropertyValueNotInList"}},
		{"secure boot with BIOS", `{"Attributes":{"BootMode":"Bios","SecureBoot":"Enabled"}}`, []string{"PropertyValueConflict"}},
		{"all at once", `{"Attributes":{"BootMode":1,"Foo":"x","MachineType":"q35"},"Bar":1}`,
			[]string{"PropertyValueTypeError", "PropertyUnknown", "PropertyNotWritable", "PropertyUnknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.do(http.MethodPatch, sys(cpA0)+"/Bios/Settings", "admin", tc.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			var got []string
			for _, m := range envelope(t, body).Error.ExtendedInfo {
				got = append(got, strings.TrimPrefix(m.MessageID, reg))
			}
			assert.ElementsMatch(t, tc.ids, got)
		})
	}
	vm := h.vm("tenant-a", "cp-0")
	assert.Equal(t, redfish.BootUEFI, kubevirt.FirmwareMode(vm), "nothing changed")
	assert.NotContains(t, vm.Annotations, kubevirt.BootAnnotation)
	resp, body := h.do(http.MethodPatch, sys(cpA0)+"/Bios/Settings", "viewer", `{"Attributes":{"BootMode":"Bios"}}`, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	resp, body = h.do(http.MethodPatch, sys(cpA0)+"/Bios/Settings", "admin", `{"Attributes":{"BootMode":"Bios"}}`, map[string]string{"If-Match": `"stale"`})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", body)
}

func TestBiosSettingsApplyAtTheNextStart(t *testing.T) {
	h := newHarness(t, true)
	path := sys(cpA0) + "/Bios/Settings"
	// What sushy sends (Bios.set_attributes with an apply time).
	resp, body := h.do(http.MethodPatch, path, "admin",
		`{"Attributes":{"BootMode":"Bios"},"@Redfish.SettingsApplyTime":{"@odata.type":"#Settings.v1_0_0.PreferredApplyTime","ApplyTime":"OnReset"}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, redfish.BootLegacy, kubevirt.FirmwareMode(h.vm("tenant-a", "cp-0")))
	assert.Equal(t, redfish.BootLegacy, h.system(cpA0).Boot.BootSourceOverrideMode, "the ComputerSystem agrees")

	// Secure Boot needs UEFI, unless the same request switches to it.
	resp, body = h.do(http.MethodPatch, path, "admin", `{"Attributes":{"SecureBoot":"Enabled"}}`, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	assert.Equal(t, reg+"PropertyValueConflict", envelope(t, body).Error.Code)
	resp, body = h.do(http.MethodPatch, path, "admin", `{"Attributes":{"BootMode":"Uefi","SecureBoot":"Enabled"}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	d := h.vm("tenant-a", "cp-0").Spec.Template.Spec.Domain
	assert.True(t, kubevirt.SecureBootEnabled(d))
	require.NotNil(t, d.Features)
	assert.NotNil(t, d.Features.SMM)

	// Running: Bios shows the running firmware, the settings object the next start's.
	h.powerOn(cpA0)
	resp, body = h.do(http.MethodPatch, path, "admin", `{"Attributes":{"SecureBoot":"Disabled"}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	h.eventually("the pending change", func() bool {
		return h.getJSON(path, "admin")["Attributes"].(map[string]any)["SecureBoot"] == "Disabled"
	})
	assert.Equal(t, "Enabled", h.getJSON(sys(cpA0)+"/Bios", "admin")["Attributes"].(map[string]any)["SecureBoot"], "still running with it")
	assert.Equal(t, "Enabled", h.getJSON(sys(cpA0)+"/SecureBoot", "admin")["SecureBootCurrentBoot"])
}

func (h *harness) patchSecureBoot(id, body string, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	return h.do(http.MethodPatch, sys(id)+"/SecureBoot", "admin", body, hdr)
}

func TestSecureBootPatchValidation(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		name, body string
		ids        []string
	}{
		{"empty object", `{}`, []string{"EmptyJSON"}},
		{"only annotations", `{"@odata.etag":"x"}`, []string{"EmptyJSON"}},
		{"malformed", `{"SecureBootEnable":`, []string{"MalformedJSON"}},
		{"not an object", `[true]`, []string{"MalformedJSON"}},
		{"a string", `{"SecureBootEnable":"true"}`, []string{"PropertyValueTypeError"}},
		{"null", `{"SecureBootEnable":null}`, []string{"PropertyValueTypeError"}},
		{"read-only", `{"SecureBootMode":"UserMode"}`, []string{"PropertyNotWritable"}},
		{"read-only current boot", `{"SecureBootCurrentBoot":"Enabled"}`, []string{"PropertyNotWritable"}},
		{"unknown", `{"SecureBootDatabases":{}}`, []string{"PropertyUnknown"}},
		{"every problem at once", `{"SecureBootEnable":1,"Id":"x","Bogus":true}`, []string{"PropertyValueTypeError", "PropertyNotWritable", "PropertyUnknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.patchSecureBoot(cpA0, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			env := envelope(t, body)
			var got []string
			for _, m := range env.Error.ExtendedInfo {
				got = append(got, strings.TrimPrefix(m.MessageID, reg))
			}
			assert.ElementsMatch(t, tc.ids, got)
		})
	}
	assert.Nil(t, h.vm("tenant-a", "cp-0").Spec.Template.Spec.Domain.Features, "nothing changed")

	resp, body := h.do(http.MethodPatch, sys(cpA0)+"/SecureBoot", "viewer", `{"SecureBootEnable":true}`, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	resp, body = h.do(http.MethodPatch, sys(cpB0)+"/SecureBoot", "alice", `{"SecureBootEnable":true}`, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	resp, body = h.do(http.MethodPost, sys(cpA0)+"/SecureBoot", "admin", `{}`, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s", body)
	assert.Equal(t, "GET, HEAD, PATCH", resp.Header.Get("Allow"))
}

func TestSecureBootPatchRoundTrip(t *testing.T) {
	h := newHarness(t, false)
	path := sys(cpA0) + "/SecureBoot"
	resp, body := h.do(http.MethodGet, path, "admin", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var sb redfish.SecureBoot
	require.NoError(t, json.Unmarshal(body, &sb))
	assert.False(t, sb.SecureBootEnable)
	assert.Equal(t, "SetupMode", sb.SecureBootMode)
	assert.Empty(t, sb.SecureBootCurrentBoot, "not booted")
	assert.Equal(t, []string{"SecureBootEnable"}, sb.WriteableProperties)
	etag := resp.Header.Get("ETag")

	// A stale ETag is refused and changes nothing.
	resp, body = h.patchSecureBoot(cpA0, `{"SecureBootEnable":true}`, map[string]string{"If-Match": `"stale"`})
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", body)
	assert.Equal(t, reg+"PreconditionFailed", envelope(t, body).Error.Code)
	assert.False(t, kubevirt.SecureBootEnabled(h.vm("tenant-a", "cp-0").Spec.Template.Spec.Domain))

	resp, body = h.patchSecureBoot(cpA0, `{"SecureBootEnable":true}`, map[string]string{"If-Match": etag})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	d := h.vm("tenant-a", "cp-0").Spec.Template.Spec.Domain
	assert.True(t, *d.Firmware.Bootloader.EFI.SecureBoot)
	require.NotNil(t, d.Features)
	require.NotNil(t, d.Features.SMM, "secure boot needs SMM")
	assert.True(t, d.Features.SMM.Enabled == nil || *d.Features.SMM.Enabled)
	h.eventually("the GET to show Secure Boot on", func() bool {
		return h.getJSON(path, "admin")["SecureBootEnable"] == true
	})
	assert.Equal(t, "UserMode", h.getJSON(path, "admin")["SecureBootMode"])
	assert.Equal(t, "Enabled", h.getJSON(sys(cpA0)+"/Bios", "admin")["Attributes"].(map[string]any)["SecureBoot"])

	// Off again: secureBoot false, SMM stays.
	resp, body = h.patchSecureBoot(cpA0, `{"SecureBootEnable":false}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	d = h.vm("tenant-a", "cp-0").Spec.Template.Spec.Domain
	assert.False(t, *d.Firmware.Bootloader.EFI.SecureBoot)
	assert.NotNil(t, d.Features.SMM)
	assert.Equal(t, redfish.BootUEFI, h.system(cpA0).Boot.BootSourceOverrideMode, "the boot mode stays UEFI")
}

func TestSecureBootRefusedInLegacyMode(t *testing.T) {
	h := newHarness(t, false)
	h.patchBoot(cpA0, `{"BootSourceOverrideMode":"Legacy"}`)
	h.eventually("Legacy mode", func() bool { return h.system(cpA0).Boot.BootSourceOverrideMode == redfish.BootLegacy })
	sb := h.getJSON(sys(cpA0)+"/SecureBoot", "admin")
	assert.Equal(t, false, sb["SecureBootEnable"])
	assert.NotContains(t, sb, "SecureBootMode")
	assert.Equal(t, []any{}, sb["@Redfish.WriteableProperties"])

	resp, body := h.patchSecureBoot(cpA0, `{"SecureBootEnable":true}`, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	env := envelope(t, body)
	assert.Equal(t, reg+"PropertyValueConflict", env.Error.Code)
	assert.Contains(t, env.Error.Message, "Legacy")
	assert.Equal(t, []string{"#/SecureBootEnable", "#/Boot/BootSourceOverrideMode"}, env.Error.ExtendedInfo[0].RelatedProperties)
	vm := h.vm("tenant-a", "cp-0")
	assert.Nil(t, vm.Spec.Template.Spec.Domain.Features, "nothing changed")
	assert.Equal(t, redfish.BootLegacy, kubevirt.FirmwareMode(vm))

	// Turning it off in Legacy mode is already true: accepted, nothing to do.
	resp, body = h.patchSecureBoot(cpA0, `{"SecureBootEnable":false}`, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

func (h *harness) patchSystem(id, body string, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	return h.do(http.MethodPatch, sys(id), "admin", body, hdr)
}

func TestIndicatorLEDRoundTrip(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		body     string
		led      redfish.IndicatorLED
		location bool
	}{
		{`{"IndicatorLED":"Lit"}`, redfish.LEDLit, true},
		{`{"IndicatorLED":"Blinking"}`, redfish.LEDBlinking, true},
		{`{"LocationIndicatorActive":false}`, redfish.LEDOff, false},
		{`{"LocationIndicatorActive":true}`, redfish.LEDLit, true},
		{`{"IndicatorLED":"Off","LocationIndicatorActive":false}`, redfish.LEDOff, false},
		{`{"IndicatorLED":"Blinking","LocationIndicatorActive":true,"@odata.etag":"ignored"}`, redfish.LEDBlinking, true},
		{`{"IndicatorLED":"Lit","Boot":{},"IndicatorLED@Redfish.AllowableValues":["Lit"]}`, redfish.LEDLit, true},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			resp, body := h.patchSystem(cpA0, tc.body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			assert.Equal(t, string(tc.led), h.vm("tenant-a", "cp-0").Annotations[kubevirt.IndicatorAnnotation], "stored on the VM")
			h.eventually("the GET to show "+string(tc.led), func() bool {
				doc := h.getJSON(sys(cpA0), "admin")
				return doc["IndicatorLED"] == string(tc.led) && doc["LocationIndicatorActive"] == tc.location
			})
		})
	}
}

func TestIndicatorLEDPatchValidation(t *testing.T) {
	h := newHarness(t, false)
	tests := []struct {
		name, body string
		ids        []string
	}{
		{"not in list", `{"IndicatorLED":"On"}`, []string{"PropertyValueNotInList"}},
		{"wrong type", `{"IndicatorLED":1}`, []string{"PropertyValueTypeError"}},
		{"location not a boolean", `{"LocationIndicatorActive":"yes"}`, []string{"PropertyValueTypeError"}},
		{"contradiction", `{"IndicatorLED":"Off","LocationIndicatorActive":true}`, []string{"PropertyValueConflict"}},
		{"contradiction the other way", `{"IndicatorLED":"Lit","LocationIndicatorActive":false}`, []string{"PropertyValueConflict"}},
		{"with a bad boot override", `{"IndicatorLED":"Lit","Boot":{"BootSourceOverrideTarget":"Floppy"}}`, []string{"PropertyValueNotInList"}},
		{"with two other problems", `{"IndicatorLED":"Dim","Boot":{"BootSourceOverrideTarget":"Floppy"},"PowerState":"On"}`,
			[]string{"PropertyValueNotInList", "PropertyValueNotInList", "PropertyNotWritable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.patchSystem(cpA0, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			var got []string
			for _, m := range envelope(t, body).Error.ExtendedInfo {
				got = append(got, strings.TrimPrefix(m.MessageID, reg))
			}
			assert.ElementsMatch(t, tc.ids, got)
		})
	}
	vm := h.vm("tenant-a", "cp-0")
	assert.NotContains(t, vm.Annotations, kubevirt.IndicatorAnnotation, "nothing is applied unless all is valid")
	assert.NotContains(t, vm.Annotations, kubevirt.BootAnnotation)

	resp, body := h.do(http.MethodPatch, sys(cpA0), "viewer", `{"IndicatorLED":"Lit"}`, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	resp, body = h.patchSystem(cpA0, `{"IndicatorLED":"Lit"}`, map[string]string{"If-Match": `"stale"`})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%s", body)
}

func TestIndicatorLEDWithBootOverrideIsOnePatch(t *testing.T) {
	h := newHarness(t, false)
	resp, body := h.do(http.MethodGet, sys(cpA0), "admin", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = h.patchSystem(cpA0, `{"IndicatorLED":"Blinking","Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}}`,
		map[string]string{"If-Match": resp.Header.Get("ETag")})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var cs redfish.ComputerSystem
	require.NoError(t, json.Unmarshal(body, &cs))
	assert.Equal(t, redfish.LEDBlinking, cs.IndicatorLED)
	assert.Equal(t, redfish.BootPxe, cs.Boot.BootSourceOverrideTarget)
	assert.Equal(t, redfish.BootContinuous, cs.Boot.BootSourceOverrideEnabled)
	vm := h.vm("tenant-a", "cp-0")
	assert.Equal(t, "Blinking", vm.Annotations[kubevirt.IndicatorAnnotation])
	assert.Contains(t, vm.Annotations, kubevirt.BootAnnotation)

	// A boot-only PATCH still works as before and leaves the LED alone.
	cs = h.patchBoot(cpA0, `{"BootSourceOverrideTarget":"None"}`)
	assert.Equal(t, redfish.LEDBlinking, cs.IndicatorLED)
}

func TestMetadataReferencesInventorySchemas(t *testing.T) {
	h := newHarness(t, false)
	_, body := h.do(http.MethodGet, "/redfish/v1/$metadata", "", "", nil)
	for _, typ := range []string{redfish.TypeProcessor, redfish.TypeProcessorColl, redfish.TypeEthernetInterface, redfish.TypeEthernetInterfaceColl,
		redfish.TypeSimpleStorage, redfish.TypeSimpleStorageColl, redfish.TypeStorage, redfish.TypeStorageColl, redfish.TypeStorageController,
		redfish.TypeStorageControllerColl, redfish.TypeDrive, redfish.TypeVolume, redfish.TypeVolumeColl, redfish.TypeSecureBoot, redfish.TypeBios,
		redfish.TypeOperationApplyTimeSupport} {
		parts := strings.Split(strings.TrimPrefix(typ, "#"), ".")
		assert.Contains(t, string(body), `<edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/`+parts[0]+`_v1.xml">`, typ)
		assert.Contains(t, string(body), `<edmx:Include Namespace="`+parts[0]+`"/>`, typ)
		if len(parts) == 3 {
			assert.Contains(t, string(body), `<edmx:Include Namespace="`+parts[0]+"."+parts[1]+`"/>`, typ)
		}
	}
}
