package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// taskFor returns the import Task of a VM, or nil.
func taskFor(t *testing.T, c *client, vm string) map[string]any {
	t.Helper()
	for _, m := range c.get(t, "/redfish/v1/TaskService/Tasks")["Members"].([]any) {
		task := c.get(t, m.(map[string]any)["@odata.id"].(string))
		if name, _ := task["Name"].(string); strings.HasSuffix(name, " for "+vm) {
			return task
		}
	}
	return nil
}

// The real server binary is killed with SIGKILL while an image import runs, while a one-time
// boot override waits for the next boot, while a session is open, and while actions are in
// flight. After each restart nothing is lost: media, Task, boot override and session are as
// before, and the server's view equals the cluster's.
func TestCrashRestart(t *testing.T) {
	c := startCluster(t)
	fast := stack.NewImageServer(t, 512<<10)
	slow := stack.NewImageServer(t, 4<<20)
	slow.Delay.Store(int64(300 * time.Millisecond)) // 64 chunks: about 20 s
	srv := c.startServer(t, "")
	cl := newClient(srv.url())

	// A session, an import in progress, and a Once override waiting for the next boot.
	tok, sessURI := cl.login(t)
	tc := cl.withToken(tok)
	cl.must(t, http.StatusNoContent, http.MethodPost, insertPath("tenant-a.cp-0"), fmt.Sprintf(`{"Image":%q}`, fast.URL+"/agent.iso"))
	eventually(t, time.Minute, "the fast import", func() bool {
		task := taskFor(t, cl, "cp-0")
		return task != nil && task["TaskState"] == "Completed"
	})
	cl.must(t, http.StatusOK, http.MethodPatch, sysPath("tenant-a.cp-0"), bootBody("Cd", "Once"))
	slowURL := slow.URL + "/discovery.iso"
	cl.must(t, http.StatusNoContent, http.MethodPost, insertPath("tenant-a.cp-1"), fmt.Sprintf(`{"Image":%q}`, slowURL))
	eventuallyf(t, time.Minute, "the slow import to be under way", func() (bool, string) {
		task := taskFor(t, cl, "cp-1")
		if task == nil {
			return false, "no task"
		}
		pct, _ := task["PercentComplete"].(float64)
		return task["TaskState"] == "Running" && pct >= 10, fmt.Sprintf("%v %v%%", task["TaskState"], pct)
	})
	before := map[string]map[string]any{
		"session": tc.get(t, sessURI),
		"cp-0":    cl.get(t, sysPath("tenant-a.cp-0")),
		"media-0": cl.get(t, mediaPath("tenant-a.cp-0")),
		"media-1": cl.get(t, mediaPath("tenant-a.cp-1")),
		"task-1":  taskFor(t, cl, "cp-1"),
	}

	srv.kill()
	killedAt := time.Now()
	srv.start()
	restart := time.Since(killedAt)
	t.Logf("killed with SIGKILL during the import (%v%% done); ready again after %v", before["task-1"]["PercentComplete"], restart.Round(time.Millisecond))

	// The session survives: same token, same resource.
	if got := tc.get(t, sessURI); got["Id"] != before["session"]["Id"] || got["UserName"] != adminUser {
		t.Errorf("session after restart: %v, before %v", got, before["session"])
	}
	tc.must(t, http.StatusOK, http.MethodGet, "/redfish/v1/Systems", "")
	// The media and the pending override survive.
	cs := cl.get(t, sysPath("tenant-a.cp-0"))
	boot := cs["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Cd" || boot["BootSourceOverrideEnabled"] != "Once" {
		t.Errorf("boot override after restart: %v", boot)
	}
	for _, id := range []string{"0", "1"} {
		got := cl.get(t, mediaPath("tenant-a.cp-"+id))
		want := before["media-"+id]
		if got["Image"] != want["Image"] || got["Inserted"] != true {
			t.Errorf("media of cp-%s after restart: %v, before %v", id, got, want)
		}
	}
	// The Task is the same one and runs to completion.
	task := taskFor(t, cl, "cp-1")
	if task == nil || task["Id"] != before["task-1"]["Id"] {
		t.Fatalf("task after restart: %v, before %v", task, before["task-1"])
	}
	importTook := eventually(t, 2*time.Minute, "the import to complete after the restart", func() bool {
		task := taskFor(t, cl, "cp-1")
		return task != nil && task["TaskState"] == "Completed"
	})
	// The Once override is carried out and consumed by the restarted server (it must win the
	// leader Lease of the killed process first).
	cl.must(t, http.StatusNoContent, http.MethodPost, resetPath("tenant-a.cp-0"), `{"ResetType":"On"}`)
	consumed := eventuallyf(t, 2*time.Minute, "the Once override to be consumed", func() (bool, string) {
		cs := cl.get(t, sysPath("tenant-a.cp-0"))
		boot := cs["Boot"].(map[string]any)
		return cs["PowerState"] == "On" && boot["BootSourceOverrideEnabled"] == "Disabled",
			fmt.Sprintf("PowerState %v Boot %v", cs["PowerState"], boot)
	})
	vmi := apiVMIBootFromCD(t, c.Dyn, "tenant-a", "cp-0")
	if !vmi {
		t.Error("the boot after the restart did not use the virtual CD first")
	}

	// Kills while actions are in flight: whatever was answered is in the cluster, and after
	// the restart the server shows exactly the cluster's state.
	actions := 0
	answered := 0
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := 0; i < 12; i++ {
			id := fmt.Sprintf("tenant-%s", []string{"a.cp-2", "b.cp-0", "a.cp-1"}[i%3])
			var method, path, body string
			switch i % 4 {
			case 0:
				method, path, body = http.MethodPatch, sysPath(id), bootBody([]string{"Pxe", "Hdd", "Cd"}[rand.IntN(3)], "Continuous")
			case 1:
				method, path, body = http.MethodPost, resetPath(id), []string{`{"ResetType":"On"}`, `{"ResetType":"ForceOff"}`}[rand.IntN(2)]
			case 2:
				method, path, body = http.MethodPost, insertPath(id), fmt.Sprintf(`{"Image":%q}`, fast.URL+fmt.Sprintf("/r%d.iso", rand.IntN(3)))
			default:
				method, path = http.MethodPost, ejectPath(id)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := cl.do(method, path, body)
				mu.Lock()
				defer mu.Unlock()
				actions++
				if r.err == nil {
					answered++
					if r.status >= 500 {
						t.Errorf("%s %s before the kill: %v", method, path, r)
					}
				}
			}()
		}
		time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		srv.kill()
		wg.Wait()
		srv.start()
		for _, id := range []string{"tenant-a.cp-2", "tenant-b.cp-0", "tenant-a.cp-1"} {
			checkMatchesCluster(t, cl, c.Dyn, id)
		}
	}
	orphans := orphanMediaVolumes(t, c.Dyn)
	if len(orphans) > 0 {
		t.Logf("media DataVolumes no VM references after the kills (garbage, collected with the VM): %v", orphans)
	}
	record(t, "crash", map[string]any{
		"restart_to_ready_ms":             ms(restart),
		"import_percent_at_kill":          before["task-1"]["PercentComplete"],
		"import_completed_after_ms":       ms(importTook),
		"once_override_consumed_after_ms": ms(consumed),
		"kills_with_actions_in_flight":    3,
		"actions_in_flight":               actions,
		"actions_answered_before_kill":    answered,
		"orphan_media_datavolumes":        len(orphans),
	})
}

// checkMatchesCluster compares the server's view of a system with the VM in the apiserver.
func checkMatchesCluster(t *testing.T, cl *client, dyn dynamic.Interface, id string) {
	t.Helper()
	ns, name, _ := kubevirt.ParseSystemID(id)
	vm := apiVM(t, dyn, ns, name)
	want := kubevirt.Boot(vm)
	wantMedia := kubevirt.MediaOf(kubevirt.Machine{VM: vm})
	eventuallyf(t, 30*time.Second, "the server to show the cluster's state of "+id, func() (bool, string) {
		cs := cl.get(t, sysPath(id))
		boot := cs["Boot"].(map[string]any)
		media := cl.get(t, mediaPath(id))
		image, _ := media["Image"].(string)
		got := fmt.Sprintf("boot %v/%v media %v %q", boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"], media["Inserted"], image)
		ok := boot["BootSourceOverrideTarget"] == string(want.Target) && boot["BootSourceOverrideEnabled"] == string(want.Enabled) &&
			media["Inserted"] == wantMedia.Inserted && image == wantMedia.Image
		return ok, got + fmt.Sprintf(", cluster boot %v/%v media %v %q", want.Target, want.Enabled, wantMedia.Inserted, wantMedia.Image)
	})
	if wantMedia.Inserted {
		dv, err := dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).Get(context.Background(), wantMedia.DataVolume, metav1.GetOptions{})
		if err != nil || dv.GetDeletionTimestamp() != nil {
			t.Errorf("%s references DataVolume %s, which is gone or going: %v", id, wantMedia.DataVolume, err)
		}
	}
}

// orphanMediaVolumes lists per-VM media DataVolumes that their VM does not reference.
func orphanMediaVolumes(t *testing.T, dyn dynamic.Interface) []string {
	t.Helper()
	var out []string
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		list, err := dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: kubevirt.MediaLabel + "=cd"})
		if err != nil {
			t.Fatal(err)
		}
		for _, dv := range list.Items {
			if dv.GetDeletionTimestamp() != nil {
				continue
			}
			vm := apiVM(t, dyn, ns, dv.GetLabels()[kubevirt.VMLabel])
			if kubevirt.MediaOf(kubevirt.Machine{VM: vm}).DataVolume != dv.GetName() {
				out = append(out, ns+"/"+dv.GetName())
			}
		}
	}
	return out
}

// apiVMIBootFromCD reports whether the running VMI boots from the virtual CD first.
func apiVMIBootFromCD(t *testing.T, dyn dynamic.Interface, ns, name string) bool {
	t.Helper()
	u, err := dyn.Resource(kubevirt.VMIResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disks, _, _ := unstructured.NestedSlice(u.Object, "spec", "domain", "devices", "disks")
	for _, d := range disks {
		m, _ := d.(map[string]any)
		if m["name"] == kubevirt.MediaDevice {
			order, _ := m["bootOrder"].(int64)
			return order == 1
		}
	}
	return false
}
