package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// createBootVM adds tenant-a/boot-0: a root disk with bootOrder 1, an installer CD-ROM and a
// NIC without orders, so every boot target has a device to select.
func createBootVM(t *testing.T, s *stack.Stack) {
	t.Helper()
	vm := sim.ControlPlaneVM("tenant-a", "boot-0", 20)
	one := uint(1)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks[0].BootOrder = &one
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{
		Name: "installer", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}},
	})
	spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "installer", VolumeSource: virtv1.VolumeSource{
		ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/example/installer:latest"},
	}})
	u, err := sim.ToUnstructured(vm)
	require.NoError(t, err)
	_, err = s.Dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
}

// orders returns the boot order of every disk and interface of a VMI or VM template.
func orders(spec virtv1.VirtualMachineInstanceSpec) map[string]uint {
	out := map[string]uint{}
	for _, d := range spec.Domain.Devices.Disks {
		if d.BootOrder != nil {
			out[d.Name] = *d.BootOrder
		}
	}
	for _, i := range spec.Domain.Devices.Interfaces {
		if i.BootOrder != nil {
			out["iface/"+i.Name] = *i.BootOrder
		}
	}
	return out
}

func vmOrders(t *testing.T, s *stack.Stack) map[string]uint {
	return orders(apiVM(t, s, "tenant-a", "boot-0").Spec.Template.Spec)
}

func TestBootOverrideAgainstAPIServer(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	createBootVM(t, s)
	c := client(t, s.URL, stack.Admin)
	const id = "tenant-a.boot-0"
	eventually(t, "the new VM in the cache", func() bool { code, _ := c.do(http.MethodGet, "/redfish/v1/Systems/"+id, nil); return code == 200 })
	original := map[string]uint{"rootdisk": 1}
	require.Equal(t, original, vmOrders(t, s))

	// Cd Once: the CD-ROM first, then everything else, numbered without gaps.
	code, body := c.do(http.MethodPatch, "/redfish/v1/Systems/"+id, map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, "Cd", boot(body)["BootSourceOverrideTarget"])
	assert.Equal(t, "Once", boot(body)["BootSourceOverrideEnabled"])
	assert.Equal(t, map[string]uint{"installer": 1, "rootdisk": 2, "iface/default": 3}, vmOrders(t, s))

	// The next boot uses it, and then the original order comes back.
	c.reset(id, "On")
	c.waitPower(id, "On")
	vmi := apiVMI(t, s, "tenant-a", "boot-0")
	assert.Equal(t, uint(1), orders(vmi.Spec)["installer"], "the boot after Cd Once starts from the CD-ROM")
	eventually(t, "the Once override consumed", func() bool {
		b := boot(c.get("/redfish/v1/Systems/" + id))
		return b["BootSourceOverrideEnabled"] == "Disabled" && b["BootSourceOverrideTarget"] == "None"
	})
	assert.Equal(t, original, vmOrders(t, s))

	// Hdd Continuous survives restarts; a Pxe Once on top of it returns to it.
	patchBoot(t, c, id, "Hdd", "Continuous")
	assert.Equal(t, map[string]uint{"rootdisk": 1, "installer": 2, "iface/default": 3}, vmOrders(t, s))
	restartAndWait(t, c, s, id)
	assert.Equal(t, "Continuous", boot(c.get("/redfish/v1/Systems/" + id))["BootSourceOverrideEnabled"])

	patchBoot(t, c, id, "Pxe", "Once")
	assert.Equal(t, map[string]uint{"iface/default": 1, "rootdisk": 2, "installer": 3}, vmOrders(t, s))
	restartAndWait(t, c, s, id)
	assert.Equal(t, uint(1), orders(apiVMI(t, s, "tenant-a", "boot-0").Spec)["iface/default"])
	eventually(t, "back to Hdd Continuous", func() bool {
		b := boot(c.get("/redfish/v1/Systems/" + id))
		return b["BootSourceOverrideEnabled"] == "Continuous" && b["BootSourceOverrideTarget"] == "Hdd"
	})
	assert.Equal(t, map[string]uint{"rootdisk": 1, "installer": 2, "iface/default": 3}, vmOrders(t, s))

	// Disabled puts the original order back.
	patchBoot(t, c, id, "None", "Disabled")
	assert.Equal(t, original, vmOrders(t, s))

	// Mode shows in the very next GET, and lands in the firmware.
	code, body = c.do(http.MethodPatch, "/redfish/v1/Systems/"+id, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}})
	require.Equal(t, http.StatusOK, code, "%v", body)
	assert.Equal(t, "Legacy", boot(c.get("/redfish/v1/Systems/" + id))["BootSourceOverrideMode"])
	fw := apiVM(t, s, "tenant-a", "boot-0").Spec.Template.Spec.Domain.Firmware
	require.NotNil(t, fw.Bootloader.BIOS)
	assert.Nil(t, fw.Bootloader.EFI)
	assert.NotEmpty(t, fw.UUID, "switching the bootloader keeps the firmware UUID")
	patchBootBody(t, c, id, map[string]any{"BootSourceOverrideMode": "UEFI"})
	assert.NotNil(t, apiVM(t, s, "tenant-a", "boot-0").Spec.Template.Spec.Domain.Firmware.Bootloader.EFI)
}

func restartAndWait(t *testing.T, c rf, s *stack.Stack, id string) {
	t.Helper()
	before := types.UID("")
	if vmi := apiVMI(t, s, "tenant-a", "boot-0"); vmi != nil {
		before = vmi.UID
	}
	c.reset(id, "ForceRestart")
	eventually(t, "a new VMI", func() bool { v := apiVMI(t, s, "tenant-a", "boot-0"); return v != nil && v.UID != before })
	c.waitPower(id, "On")
}

func patchBoot(t *testing.T, c rf, id, target, enabled string) {
	t.Helper()
	patchBootBody(t, c, id, map[string]any{"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled})
}

func patchBootBody(t *testing.T, c rf, id string, b map[string]any) {
	t.Helper()
	code, body := c.do(http.MethodPatch, "/redfish/v1/Systems/"+id, map[string]any{"Boot": b})
	require.Equal(t, http.StatusOK, code, "%v", body)
}

// A bad body is refused whole: nothing reaches the cluster.
func TestBadBootPatchChangesNothing(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	before := apiVM(t, s, "tenant-a", "cp-2")
	for _, body := range []map[string]any{
		{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideMode": "Floppy"}},
		{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd"}, "PowerState": "On"},
		{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "Bogus": true}},
		{"Boot": "Cd"},
	} {
		code, resp := c.do(http.MethodPatch, "/redfish/v1/Systems/tenant-a.cp-2", body)
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, resp, "error")
	}
	assert.Equal(t, before.ResourceVersion, apiVM(t, s, "tenant-a", "cp-2").ResourceVersion)
}

// Two replicas and a third, foreign writer change one VM at once. Each replica retries on
// conflict, so no update is lost: the final VM holds the last change each writer made.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	a := client(t, s.URL, stack.Admin)
	b := client(t, s.AddServer(t), stack.Admin)
	const id = "tenant-a.cp-0"
	modes := []string{"Legacy", "UEFI"}
	targets := []string{"Hdd", "Pxe"}
	const rounds = 12
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			code, body := a.do(http.MethodPatch, "/redfish/v1/Systems/"+id, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": modes[i%2]}})
			assert.Equal(t, http.StatusOK, code, "%v", body)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			code, body := b.do(http.MethodPatch, "/redfish/v1/Systems/"+id, map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": targets[i%2], "BootSourceOverrideEnabled": "Continuous"}})
			assert.Equal(t, http.StatusOK, code, "%v", body)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"writer-%d":"x"}}}`, i)
			_, err := s.Dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Patch(context.Background(), "cp-0",
				types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			assert.NoError(t, err)
		}
	}()
	wg.Wait()
	vm := apiVM(t, s, "tenant-a", "cp-0")
	for i := 0; i < rounds; i++ {
		assert.Contains(t, vm.Labels, fmt.Sprintf("writer-%d", i))
	}
	want := kubevirt.BootSettings{Target: "Pxe", Enabled: "Continuous", Mode: "UEFI"}
	assert.Equal(t, want, kubevirt.Boot(vm), "the last write of each writer wins")
	assert.Equal(t, uint(1), orders(vm.Spec.Template.Spec)["iface/default"], "orders follow the final target")
}
