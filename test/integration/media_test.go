package integration

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

func insert(t *testing.T, c rf, id, image string) {
	t.Helper()
	code, body := c.do(http.MethodPost, "/redfish/v1/Systems/"+id+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		map[string]any{"Image": image, "Inserted": true, "WriteProtected": true})
	require.Equal(t, http.StatusNoContent, code, "insert on %s: %v", id, body)
}

func eject(t *testing.T, c rf, id string) {
	t.Helper()
	code, body := c.do(http.MethodPost, "/redfish/v1/Systems/"+id+"/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", nil)
	require.Equal(t, http.StatusNoContent, code, "eject on %s: %v", id, body)
}

// taskOf finds the import task of a system.
func taskOf(t *testing.T, c rf, vm string) map[string]any {
	t.Helper()
	for _, m := range c.get("/redfish/v1/TaskService/Tasks")["Members"].([]any) {
		task := c.get(m.(map[string]any)["@odata.id"].(string))
		if name, _ := task["Name"].(string); len(name) > 0 && hasSuffix(name, " for "+vm) {
			return task
		}
	}
	return nil
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

func waitTask(t *testing.T, c rf, vm, state string) map[string]any {
	t.Helper()
	var task map[string]any
	eventually(t, "task of "+vm+" "+state, func() bool {
		task = taskOf(t, c, vm)
		return task != nil && task["TaskState"] == state
	})
	return task
}

var pvcResource = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// The whole Ironic virtual-media boot: insert (answers at once, GET shows it at once), Cd Once,
// On (waits for the import: PoweringOn meanwhile), the boot uses the CD, eject leaves nothing.
func TestVirtualMediaBootAgainstAPIServer(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 4<<20)
	img.Delay.Store(int64(40 * time.Millisecond)) // ~2.5 s for 64 chunks
	const id = "tenant-a.cp-0"
	url := img.URL + "/discovery.iso"

	start := time.Now()
	insert(t, c, id, url)
	assert.Less(t, time.Since(start), 2*time.Second, "InsertMedia must not wait for the download")
	media := c.get("/redfish/v1/Systems/" + id + "/VirtualMedia/Cd")
	assert.Equal(t, url, media["Image"])
	assert.Equal(t, "discovery.iso", media["ImageName"])
	assert.Equal(t, true, media["Inserted"])
	assert.Equal(t, media, c.get(c.get("/redfish/v1/Managers/" + id + "/VirtualMedia")["Members"].([]any)[0].(map[string]any)["@odata.id"].(string)),
		"the Manager's collection leads to the same drive")

	vm := apiVM(t, s, "tenant-a", "cp-0")
	dv := kubevirt.MediaOf(kubevirt.Machine{VM: vm}).DataVolume
	require.NotEmpty(t, dv)
	assert.Equal(t, "Off", c.powerState(id), "inserting media does not power on")
	assert.Equal(t, "Halted", runStrategy(vm))

	patchBoot(t, c, id, "Cd", "Once")
	c.reset(id, "On")
	assert.Equal(t, "PoweringOn", c.powerState(id), "the power-on waits for the import")
	running := waitTask(t, c, "cp-0", "Running")
	assert.GreaterOrEqual(t, running["PercentComplete"], float64(0))
	c.waitPower(id, "On")
	assert.Equal(t, "Completed", taskOf(t, c, "cp-0")["TaskState"])
	assert.Equal(t, float64(100), taskOf(t, c, "cp-0")["PercentComplete"])
	vmi := apiVMI(t, s, "tenant-a", "cp-0")
	assert.Equal(t, uint(1), orders(vmi.Spec)[kubevirt.MediaDevice], "the boot started from the virtual CD")

	// Ironic: eject at the end of the deploy, then boot from disk.
	eject(t, c, id)
	media = c.get("/redfish/v1/Systems/" + id + "/VirtualMedia/Cd")
	assert.Equal(t, false, media["Inserted"])
	assert.Nil(t, media["Image"])
	vm = apiVM(t, s, "tenant-a", "cp-0")
	for _, d := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		assert.NotEqual(t, kubevirt.MediaDevice, d.Name)
	}
	ctx := context.Background()
	eventually(t, "the media DataVolume deleted", func() bool {
		_, err := s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a").Get(ctx, dv, metav1.GetOptions{})
		return err != nil
	})
	// The running guest still has the CD (KubeVirt changes volumes at the next start), so
	// pvc-protection keeps its claim until the power-off; then nothing is left.
	c.reset(id, "ForceOff")
	c.waitPower(id, "Off")
	eventually(t, "the media PVC deleted after power-off", func() bool {
		_, err := s.Dyn.Resource(pvcResource).Namespace("tenant-a").Get(ctx, dv, metav1.GetOptions{})
		return err != nil
	})
	eject(t, c, id) // ejecting an empty drive succeeds
	patchBoot(t, c, id, "Hdd", "Continuous")
}

// Three control-plane VMs get the same ISO at once: it is downloaded once.
func TestOneDownloadPerImage(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 3<<20)
	url := img.URL + "/agent.iso"
	var wg sync.WaitGroup
	for _, vm := range []string{"cp-0", "cp-1", "cp-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			insert(t, c, "tenant-a."+vm, url)
		}()
	}
	wg.Wait()
	for _, vm := range []string{"cp-0", "cp-1", "cp-2"} {
		waitTask(t, c, vm, "Completed")
	}
	t.Logf("bytes fetched from the image server for 3 VMs and one %d-byte image: %d", img.Size, img.Sent.Load())
	assert.Equal(t, int64(img.Size), img.Sent.Load(), "one download for three VMs")

	// Same URL again: a no-op. Another URL: replaces the media.
	before := apiVM(t, s, "tenant-a", "cp-0").ResourceVersion
	insert(t, c, "tenant-a.cp-0", url)
	assert.Equal(t, before, apiVM(t, s, "tenant-a", "cp-0").ResourceVersion)
	insert(t, c, "tenant-a.cp-0", img.URL+"/other.iso")
	assert.Equal(t, img.URL+"/other.iso", c.get("/redfish/v1/Systems/tenant-a.cp-0/VirtualMedia/Cd")["Image"])
}

// A failed import says why, and the VM never boots without its media.
func TestImportFailureIsReported(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 1<<20)
	insert(t, c, "tenant-a.cp-1", img.URL+"/missing.iso")
	task := waitTask(t, c, "cp-1", "Exception")
	assert.Equal(t, "Critical", task["TaskStatus"])
	msg := task["Messages"].([]any)[0].(map[string]any)["Message"].(string)
	assert.Contains(t, msg, "404")
	c.reset("tenant-a.cp-1", "On")
	time.Sleep(time.Second)
	assert.Equal(t, "PoweringOn", c.powerState("tenant-a.cp-1"), "no boot without the media")
}

// Bad InsertMedia bodies are 400s naming the parameter, and change nothing.
func TestInsertMediaValidation(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	before := apiVM(t, s, "tenant-a", "cp-2").ResourceVersion
	for _, body := range []map[string]any{
		{},
		{"Image": "ftp://example.com/a.iso"},
		{"Image": "http://user:pw@example.com/a.iso"},
		{"Image": 42},
		{"Image": "http://example.com/a.iso", "TransferProtocolType": "NFS"},
		{"Image": "http://example.com/a.iso", "Bogus": 1},
		{"Image": "http://example.com/a.iso", "UserName": "u"},
	} {
		code, resp := c.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-2/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", body)
		assert.Equal(t, http.StatusBadRequest, code, "%v", body)
		assert.Contains(t, resp, "error")
		assert.NotContains(t, mustString(resp), "pw@", "credentials never echo back")
	}
	assert.Equal(t, before, apiVM(t, s, "tenant-a", "cp-2").ResourceVersion)
}

// A restarted server reports the same media and the import task continues.
func TestMediaStateSurvivesRestart(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 4<<20)
	img.Delay.Store(int64(30 * time.Millisecond))
	url := img.URL + "/ramdisk.iso"
	insert(t, c, "tenant-a.cp-2", url)
	waitTask(t, c, "cp-2", "Running")

	restarted := client(t, s.AddServer(t), stack.Admin) // a fresh process: empty caches
	assert.Equal(t, url, restarted.get("/redfish/v1/Systems/tenant-a.cp-2/VirtualMedia/Cd")["Image"])
	waitTask(t, restarted, "cp-2", "Completed")
}

// An image cache no VM uses any more is deleted after the retention period, with its
// credentials; one still in use is kept.
func TestUnusedImageCacheIsCollected(t *testing.T) {
	s := stack.Start(t, stack.Options{CacheRetention: 2 * time.Second})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 1<<20)
	used, dropped := img.URL+"/kept.iso", img.URL+"/dropped.iso"
	insert(t, c, "tenant-a.cp-0", used)
	code, body := c.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		map[string]any{"Image": dropped, "UserName": "ironic", "Password": "s3cret"})
	require.Equal(t, http.StatusNoContent, code, "%v", body)
	waitTask(t, c, "cp-0", "Completed")
	waitTask(t, c, "cp-1", "Completed")
	eject(t, c, "tenant-a.cp-1")

	ctx := context.Background()
	dvs := s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a")
	secret := kubevirt.CacheDataVolumeName(dropped) + "-auth"
	eventually(t, "the unused cache and its credentials deleted", func() bool {
		_, dvErr := dvs.Get(ctx, kubevirt.CacheDataVolumeName(dropped), metav1.GetOptions{})
		_, secErr := s.Dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("tenant-a").Get(ctx, secret, metav1.GetOptions{})
		return dvErr != nil && secErr != nil
	})
	_, err := dvs.Get(ctx, kubevirt.CacheDataVolumeName(used), metav1.GetOptions{})
	assert.NoError(t, err, "a cache in use stays")
}

// With declarative hotplug, a VM that booted with an empty tray gets its media at once.
func TestMediaHotplugIntoRunningVM(t *testing.T) {
	s := stack.Start(t, stack.Options{Sim: sim.Options{DeclarativeHotplug: true}})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 1<<20)
	const id = "tenant-a.cp-0"
	// Insert and eject while off: the CD-ROM stays as an empty tray.
	insert(t, c, id, img.URL+"/first.iso")
	eject(t, c, id)
	c.reset(id, "On")
	c.waitPower(id, "On")

	url := img.URL + "/live.iso"
	insert(t, c, id, url)
	eventually(t, "the media in the running VMI", func() bool {
		return kubevirt.MediaOf(kubevirt.Machine{VM: apiVM(t, s, "tenant-a", "cp-0"), VMI: apiVMI(t, s, "tenant-a", "cp-0")}).PendingRestart == false &&
			c.get("/redfish/v1/Systems/" + id + "/VirtualMedia/Cd")["Status"].(map[string]any)["State"] == "Enabled"
	})
	dv := kubevirt.MediaOf(kubevirt.Machine{VM: apiVM(t, s, "tenant-a", "cp-0")}).DataVolume
	found := false
	for _, v := range apiVMI(t, s, "tenant-a", "cp-0").Spec.Volumes {
		found = found || (v.DataVolume != nil && v.DataVolume.Name == dv && v.DataVolume.Hotpluggable)
	}
	assert.True(t, found, "the running VMI has the hotplugged volume")

	eject(t, c, id)
	eventually(t, "the media gone from the running VMI", func() bool {
		for _, v := range apiVMI(t, s, "tenant-a", "cp-0").Spec.Volumes {
			if v.Name == kubevirt.MediaDevice {
				return false
			}
		}
		return true
	})
	assert.Equal(t, "On", c.powerState(id), "media changes never touch power")
}

// Without hotplug, media inserted into a running VM waits for its next start, and says so.
func TestMediaChangeOfRunningVMIsPending(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	img := stack.NewImageServer(t, 1<<20)
	const id = "tenant-a.cp-1"
	c.reset(id, "On")
	c.waitPower(id, "On")
	insert(t, c, id, img.URL+"/later.iso")
	media := c.get("/redfish/v1/Systems/" + id + "/VirtualMedia/Cd")
	assert.Equal(t, true, media["Inserted"])
	assert.Equal(t, "StandbyOffline", media["Status"].(map[string]any)["State"])
	assert.Contains(t, media["Description"], "next power on")
}
