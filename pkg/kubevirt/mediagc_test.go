package kubevirt

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func withUID(uid string) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.UID = types.UID(uid) }
}

func withVolumes(vols ...virtv1.Volume) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes = vols }
}

// counterValue reads a counter (prometheus/testutil would need a module outside go.sum).
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// mediaDV is a per-VM media DataVolume as InsertMedia creates it for vm, created at created.
func mediaDV(vm *virtv1.VirtualMachine, name string, created time.Time) *cdiv1.DataVolume {
	dv := MediaDataVolume(vm, "http://images.example/agent.iso", Storage{Size: resource.MustParse("1Gi")})
	dv.Name = name
	dv.UID = types.UID("uid-" + name)
	dv.ResourceVersion = "7"
	dv.CreationTimestamp = metav1.NewTime(created)
	return dv
}

// addDVs stores DataVolumes in the fake cluster and waits for the client's cache to show them.
func (e *fakeEnv) addDVs(dvs ...*cdiv1.DataVolume) {
	e.t.Helper()
	for _, dv := range dvs {
		u, err := ToUnstructured(dv)
		require.NoError(e.t, err)
		_, err = e.fake.Resource(DataVolumeResource).Namespace(dv.Namespace).Create(e.ctx, u, metav1.CreateOptions{})
		require.NoError(e.t, err)
	}
	require.Eventually(e.t, func() bool {
		for _, dv := range dvs {
			if _, ok := e.client.DataVolume(dv.Namespace, dv.Name); !ok {
				return false
			}
		}
		return true
	}, 5*time.Second, 2*time.Millisecond, "the cache shows the DataVolumes")
	e.writes()
}

func (e *fakeEnv) storedDV(name string) bool {
	e.t.Helper()
	_, err := e.fake.Resource(DataVolumeResource).Namespace("tenant-a").Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(e.t, err)
	return true
}

// enforcePreconditions makes the fake answer a DataVolume delete as the apiserver does when
// its UID or resourceVersion precondition does not match the stored object (the fake ignores
// preconditions).
func enforcePreconditions(f *dynamicfake.FakeDynamicClient) {
	f.PrependReactor("delete", "datavolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		pre := d.GetDeleteOptions().Preconditions
		if pre == nil {
			return false, nil, nil
		}
		obj, err := f.Tracker().Get(a.GetResource(), a.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		if pre.UID != nil && *pre.UID != m.GetUID() || pre.ResourceVersion != nil && *pre.ResourceVersion != m.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(DataVolumeResource.GroupResource(), d.GetName(), nil)
		}
		return false, nil, nil
	})
}

// One sweep over every kind of media DataVolume: only the old one whose live VM does not
// reference it is deleted, with preconditions, logged and counted.
func TestMediaOrphanSweep(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-DefaultMediaOrphanGrace - time.Second)
	plain := clusterVM("plain", withUID("uid-plain"))
	viaDV := clusterVM("via-dv", withUID("uid-via-dv"), withVolumes(virtv1.Volume{Name: MediaDevice,
		VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "via-dv-cd"}}}))
	viaHotplug := clusterVM("via-hotplug", withUID("uid-via-hotplug"), withVolumes(virtv1.Volume{Name: MediaDevice,
		VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "via-hotplug-cd", Hotpluggable: true}}}))
	viaPVC := clusterVM("via-pvc", withUID("uid-via-pvc"), withVolumes(virtv1.Volume{Name: "extra",
		VolumeSource: virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "via-pvc-cd"}}}}))
	viaAnnotation := clusterVM("via-annotation", withUID("uid-via-annotation"),
		withAnnotations(map[string]string{MediaAnnotation: `{"image":"http://images.example/agent.iso","dataVolume":"via-annotation-cd"}`}))
	e := newFakeEnv(t, enforcePreconditions, plain, viaDV, viaHotplug, viaPVC, viaAnnotation)
	core, logs := observer.New(zap.InfoLevel)
	e.client.log = zap.New(core)

	gone := clusterVM("gone", withUID("uid-gone")) // never stored: its VM was deleted
	recreated := clusterVM("plain", withUID("uid-plain-before"))
	unlabelled := mediaDV(plain, "unlabelled", old)
	unlabelled.Labels = nil
	cache := mediaDV(plain, "labelled-cache", old)
	cache.Labels[MediaLabel] = "cache"
	deleting := mediaDV(plain, "deleting", old)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	deleting.Finalizers = []string{"test/keep"}
	noTimestamp := mediaDV(plain, "no-timestamp", old)
	noTimestamp.CreationTimestamp = metav1.Time{}
	noOwner := mediaDV(plain, "no-owner", old)
	noOwner.OwnerReferences = nil

	e.addDVs(
		mediaDV(plain, "orphan", old),
		mediaDV(plain, "young", now.Add(-DefaultMediaOrphanGrace+time.Second)),
		mediaDV(viaDV, "via-dv-cd", old),
		mediaDV(viaHotplug, "via-hotplug-cd", old),
		mediaDV(viaPVC, "via-pvc-cd", old),
		mediaDV(viaAnnotation, "via-annotation-cd", old),
		mediaDV(gone, "vm-gone", old),
		mediaDV(recreated, "owner-recreated", old),
		unlabelled, cache, deleting, noTimestamp, noOwner,
	)

	e.client.sweepOrphanMedia(e.ctx, now)

	w := e.writes()
	require.Len(t, w, 1, "one delete: %v", w)
	del, ok := w[0].(clienttesting.DeleteAction)
	require.True(t, ok, "%T", w[0])
	assert.Equal(t, "orphan", del.GetName())
	pre := del.GetDeleteOptions().Preconditions
	require.NotNil(t, pre)
	require.NotNil(t, pre.UID)
	require.NotNil(t, pre.ResourceVersion)
	assert.Equal(t, types.UID("uid-orphan"), *pre.UID)
	assert.Equal(t, "7", *pre.ResourceVersion)

	assert.False(t, e.storedDV("orphan"), "an unreferenced media DataVolume older than the grace is deleted")
	for name, why := range map[string]string{
		"young":             "younger than the grace: an insert may be about to patch the VM",
		"via-dv-cd":         "the VM's dataVolume volume uses it",
		"via-hotplug-cd":    "the VM's hotpluggable volume uses it",
		"via-pvc-cd":        "the VM mounts its PVC",
		"via-annotation-cd": "the VM reports it as its media",
		"vm-gone":           "its VM is gone: Kubernetes' garbage collector deletes it",
		"owner-recreated":   "its owner was replaced by a new VM of the same name: the garbage collector's too",
		"unlabelled":        "not labelled as ours",
		"labelled-cache":    "an image cache, which the cache sweep handles",
		"deleting":          "already being deleted",
		"no-timestamp":      "its age is unknown",
		"no-owner":          "not owned by its VM",
	} {
		assert.True(t, e.storedDV(name), "%s is kept: %s", name, why)
	}
	assert.Equal(t, 1.0, counterValue(t, e.client.metrics.MediaOrphansDeleted))
	entries := logs.FilterMessage("deleted a media DataVolume its VM does not reference").All()
	require.Len(t, entries, 1)
	fields := entries[0].ContextMap()
	assert.Equal(t, "tenant-a", fields["namespace"])
	assert.Equal(t, "orphan", fields["name"])
	assert.Equal(t, "plain", fields["vm"])

	// The next sweep, once the cache shows the deletion, has nothing left to do.
	require.Eventually(t, func() bool { _, ok := e.client.DataVolume("tenant-a", "orphan"); return !ok }, 5*time.Second, 2*time.Millisecond)
	e.client.sweepOrphanMedia(e.ctx, now)
	assert.Empty(t, e.writes())
	assert.Equal(t, 1.0, counterValue(t, e.client.metrics.MediaOrphansDeleted))
}

// A DataVolume replaced or changed after the cache showed it is not deleted: the preconditions
// make the apiserver refuse, and the sweep counts and logs nothing.
func TestMediaOrphanSweepDeletesOnlyTheObjectJudged(t *testing.T) {
	now := time.Now()
	vm := clusterVM("cp-0", withUID("uid-cp-0"))
	e := newFakeEnv(t, enforcePreconditions, vm)
	stored := mediaDV(vm, "orphan", now.Add(-time.Hour))
	e.addDVs(stored)

	for name, judged := range map[string]func(*cdiv1.DataVolume){
		"replaced": func(dv *cdiv1.DataVolume) { dv.UID = "uid-of-the-one-before" },
		"changed":  func(dv *cdiv1.DataVolume) { dv.ResourceVersion = "6" },
	} {
		dv := stored.DeepCopy()
		judged(dv)
		require.NoError(t, e.client.deleteOrphanMedia(e.ctx, dv, vm), name)
		assert.True(t, e.storedDV("orphan"), "%s: the stored DataVolume survives", name)
	}
	assert.Equal(t, 0.0, counterValue(t, e.client.metrics.MediaOrphansDeleted))
	assert.Equal(t, 0.0, counterValue(t, e.client.metrics.APIErrors.WithLabelValues("delete_datavolumes")), "a conflict is no error")
}

// The sweep runs in the leader's background loop, next to the image cache sweep.
func TestMediaOrphanSweepRunsInBackground(t *testing.T) {
	vm := clusterVM("cp-0", withUID("uid-cp-0"))
	e := newFakeEnv(t, nil, vm)
	e.client.SweepInterval = 10 * time.Millisecond
	e.addDVs(mediaDV(vm, "orphan", time.Now().Add(-DefaultMediaOrphanGrace-time.Minute)),
		mediaDV(vm, "young", time.Now()))
	go e.client.RunBackground(e.ctx)
	require.Eventually(t, func() bool { return !e.storedDV("orphan") }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // several more sweeps
	assert.True(t, e.storedDV("young"))
}
