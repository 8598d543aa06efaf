package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim/simtest"
)

func TestGCDeletesDataVolumeOfDeletedVMAndItsPVC(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	vm := vmWithDataVolume("tenant-a", "owner", "owner-cd")
	halted := virtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	f.create(vm)
	f.create(newDV("tenant-a", "owner-cd", httpSource(srv.URL+"/img/o.iso?size=1000"), ownedByVM(vm)))
	// A DataVolume nobody owns stays.
	f.create(newDV("tenant-a", "free", httpSource(srv.URL+"/img/o.iso?size=1000")))
	f.watchDV("tenant-a", "owner-cd", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	f.watchDV("tenant-a", "free", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	require.NotNil(t, f.pvc("tenant-a", "owner-cd"))

	require.NoError(t, f.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Delete(f.ctx, "owner", metav1.DeleteOptions{}))
	eventually(t, "the DataVolume to be collected", 5*time.Second, func() bool { return f.dv("tenant-a", "owner-cd") == nil })
	eventually(t, "the PVC to be collected", 5*time.Second, func() bool { return f.pvc("tenant-a", "owner-cd") == nil })
	time.Sleep(300 * time.Millisecond)
	assert.NotNil(t, f.dv("tenant-a", "free"))
	assert.NotNil(t, f.pvc("tenant-a", "free"))
}

func TestGCKeepsObjectsWithAnUnknownOwner(t *testing.T) {
	f := startFake(t)
	pvc := claim("tenant-a", "foreign")
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Thing", Name: "gone", UID: newUID()}}
	f.create(pvc)
	pvc2 := claim("tenant-a", "orphaned")
	pvc2.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: "gone", UID: newUID()}}
	f.create(pvc2)
	eventually(t, "the orphan to be collected", 5*time.Second, func() bool { return f.pvc("tenant-a", "orphaned") == nil })
	assert.NotNil(t, f.pvc("tenant-a", "foreign"))
}

func claim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: newUID()},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// The fake clientset deletes at once whatever the finalizers; a deletion in progress is
// modelled by creating objects that already carry a deletionTimestamp.
func deleting(m *metav1.ObjectMeta, finalizers ...string) {
	now := metav1.Now()
	m.DeletionTimestamp = &now
	m.Finalizers = finalizers
}

// startDeleting marks a VM as being deleted with a finalizer, as the apiserver does on a
// foreground or orphan delete.
func (f *fakeCluster) startDeleting(vm *virtv1.VirtualMachine, finalizer string) {
	f.t.Helper()
	deleting(&vm.ObjectMeta, finalizer)
	u, err := ToUnstructured(vm)
	require.NoError(f.t, err)
	_, err = f.dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Update(f.ctx, u, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

func TestGCPVCProtection(t *testing.T) {
	f := startFake(t)
	vm := ControlPlaneVM("tenant-a", "user", 60)
	vm.UID = newUID()
	always := virtv1.RunStrategyAlways
	vm.Spec.RunStrategy = &always
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, virtv1.Volume{Name: "data", VolumeSource: virtv1.VolumeSource{
		PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "in-use"}},
	}})
	f.create(vm)
	eventually(t, "the VMI", 5*time.Second, func() bool { return f.vmi("tenant-a", "user") != nil })
	pvc := claim("tenant-a", "in-use")
	deleting(&pvc.ObjectMeta, finalizerPVCProtection)
	f.create(pvc)
	free := claim("tenant-a", "unused")
	deleting(&free.ObjectMeta, finalizerPVCProtection, "example.com/other")
	f.create(free)

	eventually(t, "the unused claim's protection to go", 5*time.Second, func() bool {
		return assert.ObjectsAreEqual([]string{"example.com/other"}, f.pvc("tenant-a", "unused").Finalizers)
	})
	assert.Equal(t, []string{finalizerPVCProtection}, f.pvc("tenant-a", "in-use").Finalizers)

	// The VMI stops: the claim is released.
	halted := virtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	u, err := ToUnstructured(vm)
	require.NoError(t, err)
	_, err = f.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Update(f.ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "the claim's protection to go", 5*time.Second, func() bool { return len(f.pvc("tenant-a", "in-use").Finalizers) == 0 })
}

func TestGCForegroundAndOrphanDeletion(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)

	// Foreground: the dependents go first, then the owner's finalizer.
	vm := ControlPlaneVM("tenant-a", "fg", 61)
	vm.UID = newUID()
	f.create(vm)
	f.create(newDV("tenant-a", "fg-cd", httpSource(srv.URL+"/img/f.iso?size=1000"), ownedByVM(vm)))
	f.watchDV("tenant-a", "fg-cd", 5*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	f.startDeleting(vm, finalizerForeground)
	eventually(t, "the dependent to go", 5*time.Second, func() bool { return f.dv("tenant-a", "fg-cd") == nil })
	eventually(t, "the owner's finalizer to go", 5*time.Second, func() bool {
		u, err := f.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Get(f.ctx, "fg", metav1.GetOptions{})
		require.NoError(t, err)
		return len(u.GetFinalizers()) == 0
	})

	// Orphan: the dependents lose their owner reference and stay.
	vm2 := ControlPlaneVM("tenant-a", "orph", 62)
	vm2.UID = newUID()
	f.create(vm2)
	f.create(newDV("tenant-a", "orph-cd", httpSource(srv.URL+"/img/f.iso?size=1000"), ownedByVM(vm2)))
	f.watchDV("tenant-a", "orph-cd", 5*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	f.startDeleting(vm2, finalizerOrphan)
	eventually(t, "the owner's finalizer to go", 5*time.Second, func() bool {
		u, err := f.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Get(f.ctx, "orph", metav1.GetOptions{})
		require.NoError(t, err)
		return len(u.GetFinalizers()) == 0
	})
	dv := f.dv("tenant-a", "orph-cd")
	require.NotNil(t, dv)
	assert.Empty(t, dv.OwnerReferences)
}
