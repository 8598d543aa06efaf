package kubevirt

import (
	"context"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// DefaultMediaOrphanGrace is how old a per-VM media DataVolume that its VM does not reference
// must be before it is deleted. InsertMedia creates the DataVolume first and patches the VM to
// use it next, so every insert in progress has one unreferenced for a while; an insert never
// adopts an existing DataVolume (each gets a fresh name), so only that window matters. It is
// bounded by the server's 30 s write timeout. Ten minutes is far beyond it, and also absorbs
// skew between the apiserver's clock (which stamps creationTimestamp, to the second) and ours,
// and a VM informer that shows the patch late. Nothing needs it shorter: an orphan only holds
// storage meanwhile.
const DefaultMediaOrphanGrace = 10 * time.Minute

// sweepOrphanMedia deletes the per-VM media DataVolumes that their VM does not use: left by an
// InsertMedia that died (or whose VM patch failed for good) after creating the DataVolume, or
// by an insert or eject that died before deleting the media it replaced. Without this they
// would hold a PVC until the VM is deleted. It reads only the informer caches; each deletion
// is the one apiserver request.
func (c *Client) sweepOrphanMedia(ctx context.Context, now time.Time) {
	for _, dv := range c.MediaDataVolumes() {
		vm, ok := c.orphanedFrom(dv, now)
		if !ok {
			continue
		}
		if err := c.deleteOrphanMedia(ctx, dv, vm); err != nil && ctx.Err() == nil {
			c.log.Warn("deleting unreferenced media DataVolume", zap.String("datavolume", dv.Namespace+"/"+dv.Name), zap.Error(err))
		}
	}
}

// orphanedFrom returns the VM of a media DataVolume that should go: older than the grace, and
// owned by a VM that the cache shows alive and not referencing it. A DataVolume whose owning VM
// is gone (or was replaced by a new VM of the same name) is Kubernetes' garbage collector's, and
// one without our owner reference is not ours to judge.
func (c *Client) orphanedFrom(dv *cdiv1.DataVolume, now time.Time) (*virtv1.VirtualMachine, bool) {
	// A zero creationTimestamp never comes from an apiserver: its age is unknown, so it is kept.
	if dv.DeletionTimestamp != nil || dv.CreationTimestamp.IsZero() || now.Sub(dv.CreationTimestamp.Time) < c.MediaOrphanGrace {
		return nil, false
	}
	name := dv.Labels[VMLabel]
	owner := metav1.GetControllerOf(dv)
	if name == "" || owner == nil || owner.Kind != "VirtualMachine" || owner.Name != name {
		return nil, false
	}
	m, ok := c.Get(dv.Namespace, name)
	if !ok || m.VM.UID != owner.UID || m.VM.DeletionTimestamp != nil {
		return nil, false
	}
	if referencesVolume(m.VM, dv.Name) {
		return nil, false
	}
	return m.VM, true
}

// referencesVolume reports whether the VM uses the DataVolume (or its PVC, which has the same
// name) under any volume, hotpluggable or not, or records it as its media.
func referencesVolume(vm *virtv1.VirtualMachine, dv string) bool {
	// The media annotation and the volume are written in one patch. The annotation counts on its
	// own too: a DataVolume that the VM still reports as its media (in every GET) is never
	// pulled from under it, whatever hand edits did to the volume.
	if MediaOf(Machine{VM: vm}).DataVolume == dv {
		return true
	}
	if vm.Spec.Template == nil {
		return false
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.DataVolume != nil && v.DataVolume.Name == dv || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == dv {
			return true
		}
	}
	return false
}

// deleteOrphanMedia deletes exactly the DataVolume judged (UID and resourceVersion
// preconditions): one replaced or changed since the cache showed it (relabelled, adopted) is
// left for the next sweep to judge again. A status write by CDI meanwhile fails it the same way,
// which only delays the deletion by a sweep.
func (c *Client) deleteOrphanMedia(ctx context.Context, dv *cdiv1.DataVolume, vm *virtv1.VirtualMachine) error {
	uid, rv := dv.UID, dv.ResourceVersion
	bg := metav1.DeletePropagationBackground
	err := c.dyn.Resource(DataVolumeResource).Namespace(dv.Namespace).Delete(ctx, dv.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &bg,
	})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.apiError("delete_datavolumes", err)
	}
	c.metrics.MediaOrphansDeleted.Inc()
	c.log.Info("deleted a media DataVolume its VM does not reference",
		zap.String("namespace", dv.Namespace), zap.String("name", dv.Name), zap.String("vm", vm.Name),
		zap.Time("created", dv.CreationTimestamp.Time))
	return nil
}
