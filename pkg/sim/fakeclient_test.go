package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// These tests pin down how client-go's fake dynamic client (the demo cluster) differs from a
// real apiserver, because the client's guards (resourceVersion assertions, UID
// preconditions, waits for the cache) behave differently on it.

func demo(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := NewDemoCluster()
	require.NoError(t, err)
	return dyn
}

func getVM(t *testing.T, dyn dynamic.Interface, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

func typedVM(t *testing.T, u *unstructured.Unstructured) *virtv1.VirtualMachine {
	t.Helper()
	vm := &virtv1.VirtualMachine{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vm))
	return vm
}

func TestDemoClusterContents(t *testing.T) {
	dyn := demo(t)
	list, err := dyn.Resource(kubevirt.VMResource).Namespace("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var ids []string
	for _, u := range list.Items {
		ids = append(ids, u.GetNamespace()+"/"+u.GetName())
		vm := typedVM(t, &u)
		require.NotNil(t, vm.Spec.RunStrategy)
		assert.Equal(t, virtv1.RunStrategyHalted, *vm.Spec.RunStrategy, "demo VMs start powered off")
		assert.NotEmpty(t, vm.UID)
		assert.NotEmpty(t, vm.Spec.Template.Spec.Domain.Firmware.UUID)
	}
	assert.ElementsMatch(t, []string{"tenant-a/cp-0", "tenant-a/cp-1", "tenant-a/cp-2", "tenant-b/cp-0"}, ids)
	vmis, err := dyn.Resource(kubevirt.VMIResource).Namespace("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, vmis.Items)
}

func TestFakeClientNeverSetsOrBumpsResourceVersion(t *testing.T) {
	dyn := demo(t)
	ctx := context.Background()
	res := dyn.Resource(kubevirt.VMResource).Namespace("tenant-a")
	assert.Empty(t, getVM(t, dyn, "tenant-a", "cp-0").GetResourceVersion(), "objects added at construction have no resourceVersion")

	_, err := res.Patch(ctx, "cp-0", types.MergePatchType, []byte(`{"spec":{"runStrategy":"Once"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	u := getVM(t, dyn, "tenant-a", "cp-0")
	assert.Empty(t, u.GetResourceVersion(), "a write does not bump the resourceVersion")
	assert.Zero(t, u.GetGeneration(), "nor the generation")
}

func TestFakeClientDoesNotEnforceResourceVersionAssertions(t *testing.T) {
	// kubevirt-redfish's patches start with "add /metadata/resourceVersion <rv it read>": on a
	// real apiserver a stale value makes the write fail with 409 Conflict. The fake applies
	// the patch anyway and stores the asserted value as the new resourceVersion.
	dyn := demo(t)
	res := dyn.Resource(kubevirt.VMResource).Namespace("tenant-a")
	patch := `[{"op":"add","path":"/metadata/resourceVersion","value":"stale-7"},{"op":"add","path":"/spec/runStrategy","value":"Once"}]`
	_, err := res.Patch(context.Background(), "cp-0", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "no conflict on the fake")
	u := getVM(t, dyn, "tenant-a", "cp-0")
	assert.Equal(t, "stale-7", u.GetResourceVersion())
	assert.Equal(t, "Once", string(*typedVM(t, u).Spec.RunStrategy))
}

func TestFakeClientStatusSubresourcePatchWritesTheWholeObject(t *testing.T) {
	// A real apiserver ignores spec changes sent to /status (and status changes sent to the
	// main resource when the CRD has a status subresource). The fake patches the whole object
	// either way.
	dyn := demo(t)
	res := dyn.Resource(kubevirt.VMResource).Namespace("tenant-a")
	_, err := res.Patch(context.Background(), "cp-0", types.MergePatchType,
		[]byte(`{"spec":{"runStrategy":"Always"},"status":{"printableStatus":"Running"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	vm := typedVM(t, getVM(t, dyn, "tenant-a", "cp-0"))
	assert.Equal(t, virtv1.RunStrategyAlways, *vm.Spec.RunStrategy, "spec changed through /status")
	assert.Equal(t, virtv1.VirtualMachineStatusRunning, vm.Status.PrintableStatus)

	// And status is writable through the main resource.
	_, err = res.Patch(context.Background(), "cp-0", types.MergePatchType, []byte(`{"status":{"printableStatus":"Stopped"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, virtv1.VirtualMachineStatusStopped, typedVM(t, getVM(t, dyn, "tenant-a", "cp-0")).Status.PrintableStatus)
}

func TestFakeClientDeleteIgnoresPreconditionsAndGrace(t *testing.T) {
	// kubevirt-redfish deletes a VMI with a UID precondition so that a replacement is left
	// alone; the fake ignores preconditions, ignores finalizers and grace periods, and removes
	// the object at once (no deletionTimestamp phase).
	dyn := demo(t)
	ctx := context.Background()
	vmi := &virtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Namespace: "tenant-a", UID: "real-uid", Finalizers: []string{"kubevirt.io/virtualMachineControllerFinalize"}},
	}
	u, err := ToUnstructured(vmi)
	require.NoError(t, err)
	res := dyn.Resource(kubevirt.VMIResource).Namespace("tenant-a")
	_, err = res.Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)

	other := types.UID("some-other-uid")
	grace := int64(30)
	err = res.Delete(ctx, "cp-0", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &other}, GracePeriodSeconds: &grace})
	require.NoError(t, err, "a real apiserver answers 409 Conflict for a UID mismatch")
	_, err = res.Get(ctx, "cp-0", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "gone at once despite the finalizer and the grace period")
}

func TestFakeClientCreateAssignsNothing(t *testing.T) {
	// No UID, creationTimestamp, resourceVersion or generation is assigned on create: the
	// simulator sets UID and creationTimestamp itself.
	dyn := demo(t)
	vmi := &virtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant-a"},
	}
	u, err := ToUnstructured(vmi)
	require.NoError(t, err)
	out, err := dyn.Resource(kubevirt.VMIResource).Namespace("tenant-a").Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Empty(t, out.GetUID())
	assert.Empty(t, out.GetResourceVersion())
	ts := out.GetCreationTimestamp()
	assert.True(t, ts.IsZero())
}

func TestCreationTimestampHasSecondPrecision(t *testing.T) {
	// metav1.Time serialises to RFC 3339 seconds: a creationTimestamp that goes through JSON
	// (as every object written to the fake does) loses its sub-second part.
	ts := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 900_000_000, time.UTC))
	vmi := &virtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "x", CreationTimestamp: ts},
	}
	u, err := ToUnstructured(vmi)
	require.NoError(t, err)
	back := &virtv1.VirtualMachineInstance{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, back))
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), back.CreationTimestamp.Time.UTC())
}
