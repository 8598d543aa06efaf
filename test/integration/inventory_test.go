package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// invResponse is a response with its headers.
type invResponse struct {
	code   int
	header http.Header
	body   map[string]any
}

// invDo sends a request with extra headers.
func invDo(t *testing.T, c rf, method, path string, body any, hdr map[string]string) invResponse {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth(c.user, stack.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := invResponse{code: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out.body), "body: %s", raw)
	}
	return out
}

// createInventoryVM adds tenant-a/inv-0 with the disks of a real installation: a root disk
// from a dataVolumeTemplate (120 GiB), a data disk on the PVC of a DataVolume (8 GiB), an
// installer CD-ROM and a cloud-init disk.
func createInventoryVM(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := context.Background()
	req := func(q string) k8sv1.VolumeResourceRequirements {
		return k8sv1.VolumeResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse(q)}}
	}
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "inv-0-data", Namespace: "tenant-a"},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: req("8Gi")},
		},
	}
	u, err := kubevirt.ToUnstructured(dv)
	require.NoError(t, err)
	_, err = s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)

	vm := sim.ControlPlaneVM("tenant-a", "inv-0", 40)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = []virtv1.Disk{
		{Name: "root", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
		{Name: "data", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
		{Name: "installer", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}},
		{Name: "cloudinit", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
	}
	spec.Volumes = []virtv1.Volume{
		{Name: "root", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "inv-0-root"}}},
		{Name: "data", VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: k8sv1.PersistentVolumeClaimVolumeSource{ClaimName: "inv-0-data"}}}},
		{Name: "installer", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/example/installer:latest"}}},
		{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
	}
	vm.Spec.DataVolumeTemplates = []virtv1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: "inv-0-root"},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: req("120Gi")},
		},
	}}
	u, err = sim.ToUnstructured(vm)
	require.NoError(t, err)
	_, err = s.Dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
}

func invMembers(body map[string]any) []string {
	var out []string
	for _, m := range body["Members"].([]any) {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	return out
}

func TestInventoryAgainstAPIServer(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	createInventoryVM(t, s)
	c := client(t, s.URL, stack.Admin)
	const cp0, inv = "tenant-a.cp-0", "tenant-a.inv-0"
	sysURI := func(id string) string { return "/redfish/v1/Systems/" + id }
	eventually(t, "the inventory VM and its DataVolume in the cache", func() bool {
		code, body := c.do(http.MethodGet, sysURI(inv)+"/SimpleStorage/1", nil)
		if code != http.StatusOK {
			return false
		}
		devs := body["Devices"].([]any)
		return len(devs) == 4 && devs[1].(map[string]any)["CapacityBytes"] != nil
	})

	t.Run("system", func(t *testing.T) {
		sys := c.get(sysURI(cp0))
		for _, key := range []string{"Processors", "EthernetInterfaces", "SimpleStorage", "Storage", "SecureBoot", "Bios"} {
			l := sys[key].(map[string]any)["@odata.id"].(string)
			assert.Equal(t, sysURI(cp0)+"/"+key, l)
			c.get(l)
		}
		assert.Equal(t, "KubeVirt UEFI", sys["BiosVersion"])
		assert.Equal(t, float64(16), sys["MemorySummary"].(map[string]any)["TotalSystemMemoryGiB"])
		r := invDo(t, c, http.MethodGet, sysURI(cp0), nil, nil)
		assert.Equal(t, "<http://redfish.dmtf.org/schemas/v1/ComputerSystem.v1_22_0.json>; rel=describedby", r.header.Get("Link"))
		assert.Equal(t, "GET, HEAD, PATCH", r.header.Get("Allow"))
	})

	t.Run("processors", func(t *testing.T) {
		coll := c.get(sysURI(cp0) + "/Processors")
		require.Equal(t, []string{sysURI(cp0) + "/Processors/0"}, invMembers(coll))
		p := c.get(sysURI(cp0) + "/Processors/0")
		assert.Equal(t, "CPU", p["ProcessorType"])
		assert.Equal(t, "x86", p["ProcessorArchitecture"])
		assert.Equal(t, "x86-64", p["InstructionSet"])
		assert.Equal(t, float64(4), p["TotalCores"])
		assert.Equal(t, float64(4), p["TotalThreads"])
	})

	t.Run("storage", func(t *testing.T) {
		ss := c.get(sysURI(inv) + "/SimpleStorage/1")
		devs := ss["Devices"].([]any)
		want := []struct {
			name string
			size any
		}{{"root", float64(120 << 30)}, {"data", float64(8 << 30)}, {"installer (CD-ROM)", nil}, {"cloudinit", nil}}
		require.Len(t, devs, len(want))
		for i, w := range want {
			d := devs[i].(map[string]any)
			assert.Equal(t, w.name, d["Name"])
			assert.Equal(t, w.size, d["CapacityBytes"], w.name)
			assert.Equal(t, map[string]any{"State": "Enabled", "Health": "OK"}, d["Status"])
		}
		st := c.get(sysURI(inv) + "/Storage/1")
		assert.Equal(t, float64(2), st["Drives@odata.count"])
		root := c.get("/redfish/v1/Chassis/" + inv + "/Drives/root")
		assert.Equal(t, float64(120<<30), root["CapacityBytes"], "the root disk's size from its dataVolumeTemplate")
		assert.Nil(t, root["MediaType"])
		vols := c.get(sysURI(inv) + "/Storage/1/Volumes")
		assert.Equal(t, []string{sysURI(inv) + "/Storage/1/Volumes/root", sysURI(inv) + "/Storage/1/Volumes/data"}, invMembers(vols))
		assert.Equal(t, float64(8<<30), c.get(sysURI(inv) + "/Storage/1/Volumes/data")["CapacityBytes"])
		assert.Equal(t, []string{sysURI(inv) + "/Storage/1/Controllers/virtio", sysURI(inv) + "/Storage/1/Controllers/sata"},
			invMembers(c.get(sysURI(inv)+"/Storage/1/Controllers")))

		// sushy's expanded read of the storage.
		exp := c.get(sysURI(inv) + "/SimpleStorage?$expand=.($levels=1)")
		m0 := exp["Members"].([]any)[0].(map[string]any)
		assert.Len(t, m0["Devices"], 4)
	})

	t.Run("bios", func(t *testing.T) {
		b := c.get(sysURI(cp0) + "/Bios")
		attrs := b["Attributes"].(map[string]any)
		assert.Equal(t, "Uefi", attrs["BootMode"])
		assert.Equal(t, "Disabled", attrs["SecureBoot"])
		settings := b["@Redfish.Settings"].(map[string]any)["SettingsObject"].(map[string]any)["@odata.id"].(string)
		assert.Equal(t, attrs, c.get(settings)["Attributes"], "nothing pending")
	})

	t.Run("ethernet interfaces and secure boot across a restart", func(t *testing.T) {
		nic := c.get(sysURI(cp0) + "/EthernetInterfaces/default")
		assert.Equal(t, "02:00:00:00:00:01", nic["MACAddress"])
		assert.Equal(t, map[string]any{"State": "Enabled", "Health": "OK"}, nic["Status"])
		assert.Equal(t, "LinkDown", nic["LinkStatus"])

		c.reset(cp0, "On")
		c.waitPower(cp0, "On")
		nic = c.get(sysURI(cp0) + "/EthernetInterfaces/default")
		assert.Equal(t, "LinkUp", nic["LinkStatus"])
		assert.Equal(t, "02:00:00:00:00:01", nic["MACAddress"], "the VMI reports the pinned MAC")
		assert.Equal(t, "Disabled", c.get(sysURI(cp0) + "/SecureBoot")["SecureBootCurrentBoot"])

		// PATCH with the ETag of the GET, as sushy does.
		get := invDo(t, c, http.MethodGet, sysURI(cp0)+"/SecureBoot", nil, nil)
		require.Equal(t, http.StatusOK, get.code)
		stale := invDo(t, c, http.MethodPatch, sysURI(cp0)+"/SecureBoot", map[string]any{"SecureBootEnable": true}, map[string]string{"If-Match": `"stale"`})
		require.Equal(t, http.StatusPreconditionFailed, stale.code, "%v", stale.body)
		r := invDo(t, c, http.MethodPatch, sysURI(cp0)+"/SecureBoot", map[string]any{"SecureBootEnable": true},
			map[string]string{"If-Match": get.header.Get("ETag")})
		require.Equal(t, http.StatusOK, r.code, "%v", r.body)
		assert.Equal(t, true, r.body["SecureBootEnable"])
		assert.Equal(t, "Disabled", r.body["SecureBootCurrentBoot"], "the running VMI booted without it")

		d := apiVM(t, s, "tenant-a", "cp-0").Spec.Template.Spec.Domain
		require.NotNil(t, d.Firmware.Bootloader.EFI.SecureBoot)
		assert.True(t, *d.Firmware.Bootloader.EFI.SecureBoot)
		require.NotNil(t, d.Features)
		require.NotNil(t, d.Features.SMM, "secure boot needs SMM")
		assert.True(t, d.Features.SMM.Enabled == nil || *d.Features.SMM.Enabled)

		c.reset(cp0, "ForceOff")
		c.waitPower(cp0, "Off")
		c.reset(cp0, "On")
		c.waitPower(cp0, "On")
		eventually(t, "the new boot with Secure Boot", func() bool {
			return c.get(sysURI(cp0) + "/SecureBoot")["SecureBootCurrentBoot"] == "Enabled"
		})
		vmi := apiVMI(t, s, "tenant-a", "cp-0")
		require.NotNil(t, vmi)
		assert.True(t, kubevirt.SecureBootEnabled(vmi.Spec.Domain))

		code, body := c.do(http.MethodPatch, sysURI(cp0)+"/SecureBoot", map[string]any{"SecureBootEnable": false})
		require.Equal(t, http.StatusOK, code, "%v", body)
		d = apiVM(t, s, "tenant-a", "cp-0").Spec.Template.Spec.Domain
		assert.False(t, *d.Firmware.Bootloader.EFI.SecureBoot)
		assert.NotNil(t, d.Features.SMM, "SMM stays")

		code, body = c.do(http.MethodPatch, sysURI(cp0)+"/SecureBoot", map[string]any{"SecureBootEnable": "yes"})
		require.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, body["error"].(map[string]any)["code"], "PropertyValueTypeError")
	})

	t.Run("secure boot refused in Legacy mode", func(t *testing.T) {
		const id = "tenant-a.cp-2"
		code, body := c.do(http.MethodPatch, sysURI(id), map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		code, body = c.do(http.MethodPatch, sysURI(id)+"/SecureBoot", map[string]any{"SecureBootEnable": true})
		require.Equal(t, http.StatusBadRequest, code, "%v", body)
		assert.Contains(t, body["error"].(map[string]any)["code"], "PropertyValueConflict")
		assert.Nil(t, apiVM(t, s, "tenant-a", "cp-2").Spec.Template.Spec.Domain.Features)
	})

	t.Run("indicator LED", func(t *testing.T) {
		const id = "tenant-a.cp-1"
		get := invDo(t, c, http.MethodGet, sysURI(id), nil, nil)
		r := invDo(t, c, http.MethodPatch, sysURI(id), map[string]any{"IndicatorLED": "Blinking"}, map[string]string{"If-Match": get.header.Get("ETag")})
		require.Equal(t, http.StatusOK, r.code, "%v", r.body)
		assert.Equal(t, "Blinking", r.body["IndicatorLED"])
		assert.Equal(t, true, r.body["LocationIndicatorActive"])
		assert.Equal(t, "Blinking", apiVM(t, s, "tenant-a", "cp-1").Annotations[kubevirt.IndicatorAnnotation])

		// Stored in the cluster: another replica reads it back.
		other := client(t, s.AddServer(t), stack.Admin)
		eventually(t, "the second replica to see the LED", func() bool { return other.get(sysURI(id))["IndicatorLED"] == "Blinking" })

		code, body := other.do(http.MethodPatch, sysURI(id), map[string]any{"LocationIndicatorActive": false})
		require.Equal(t, http.StatusOK, code, "%v", body)
		assert.Equal(t, "Off", apiVM(t, s, "tenant-a", "cp-1").Annotations[kubevirt.IndicatorAnnotation])
		eventually(t, "the first replica to see the LED off", func() bool { return c.get(sysURI(id))["IndicatorLED"] == "Off" })
	})

	t.Run("protocol", func(t *testing.T) {
		r := invDo(t, c, http.MethodGet, "/redfish/v1/", nil, map[string]string{"OData-Version": "4.1"})
		assert.Equal(t, http.StatusPreconditionFailed, r.code)
		r = invDo(t, c, http.MethodGet, "/redfish/v1/?$top=1", nil, nil)
		assert.Equal(t, http.StatusNotImplemented, r.code)
		r = invDo(t, c, http.MethodGet, "/redfish/v1/?rpvunknown", nil, nil)
		assert.Equal(t, http.StatusOK, r.code)
	})
}
