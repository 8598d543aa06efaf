package kubevirt

import (
	"context"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// unusedAnnotation on an image cache DataVolume records since when no VM's media uses it.
const unusedAnnotation = "redfish.kubevirt.io/unused-since"

// DefaultCacheRetention is how long an image cache outlives its last user: long enough for
// Ironic's eject-then-insert of the same image, short enough that per-node images (Ironic
// serves boot-<node>.iso) do not pile up.
const DefaultCacheRetention = 10 * time.Minute

// DefaultSweepInterval is how often unused image caches are looked for.
const DefaultSweepInterval = 30 * time.Second

// sweepImageCaches deletes image cache DataVolumes (and their credentials) that no VM's media
// has used for the retention period. The "unused since" mark lives on the DataVolume, so a
// leader change or a restart does not reset the clock. Each pass first deletes the per-VM
// media DataVolumes that their VM does not reference (sweepOrphanMedia): those count as users
// of their cache, so they would pin it as well.
func (c *Client) sweepImageCaches(ctx context.Context) {
	t := time.NewTicker(c.SweepInterval)
	defer t.Stop()
	for {
		now := time.Now()
		c.sweepOrphanMedia(ctx, now)
		c.sweepOnce(ctx, now)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Client) sweepOnce(ctx context.Context, now time.Time) {
	used := map[string]bool{}
	for _, dv := range c.MediaDataVolumes() {
		used[dv.Namespace+"/"+CacheDataVolumeName(dv.Annotations[ImageAnnotation])] = true
	}
	for _, nc := range c.namespaces {
		for _, obj := range nc.dvs.GetIndexer().List() {
			dv := obj.(*cdiv1.DataVolume)
			if dv.Labels[MediaLabel] != "cache" || dv.DeletionTimestamp != nil {
				continue
			}
			if err := c.sweepCache(ctx, dv, used[dv.Namespace+"/"+dv.Name], now); err != nil && ctx.Err() == nil {
				c.log.Warn("sweeping image cache", zap.String("datavolume", dv.Namespace+"/"+dv.Name), zap.Error(err))
			}
		}
	}
}

// markUsed clears the unused mark of a cache about to be reused.
func (c *Client) markUsed(ctx context.Context, dv *cdiv1.DataVolume) error {
	if _, marked := dv.Annotations[unusedAnnotation]; !marked {
		return nil
	}
	_, err := c.dyn.Resource(DataVolumeResource).Namespace(dv.Namespace).Patch(ctx, dv.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+unusedAnnotation+`":null}}}`), metav1.PatchOptions{})
	return c.apiError("patch_datavolumes", err)
}

func (c *Client) sweepCache(ctx context.Context, dv *cdiv1.DataVolume, used bool, now time.Time) error {
	since, marked := dv.Annotations[unusedAnnotation]
	res := c.dyn.Resource(DataVolumeResource).Namespace(dv.Namespace)
	switch {
	case used:
		return c.markUsed(ctx, dv)
	case !marked:
		_, err := res.Patch(ctx, dv.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+unusedAnnotation+`":"`+now.UTC().Format(time.RFC3339)+`"}}}`), metav1.PatchOptions{})
		return c.apiError("patch_datavolumes", err)
	}
	t, err := time.Parse(time.RFC3339, since)
	if err == nil && now.Sub(t) < c.CacheRetention {
		return nil
	}
	// Deleted only at the resourceVersion seen unused: an insert that reuses the cache first
	// clears the mark (ensureCache), which makes this delete fail instead of pulling the
	// source from under the insert's clone.
	rv := dv.ResourceVersion
	err = res.Delete(ctx, dv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.apiError("delete_datavolumes", err)
	}
	src := dv.Spec.Source
	if src == nil || src.HTTP == nil {
		return nil
	}
	if src.HTTP.SecretRef != "" {
		err := c.dyn.Resource(secretResource).Namespace(dv.Namespace).Delete(ctx, src.HTTP.SecretRef, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return c.apiError("delete_secrets", err)
		}
	}
	// The presented certificates of media insecureTLS; a configured caConfigMap is the user's.
	if src.HTTP.CertConfigMap == dv.Name+caConfigMapSuffix {
		err := c.dyn.Resource(configMapResource).Namespace(dv.Namespace).Delete(ctx, src.HTTP.CertConfigMap, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return c.apiError("delete_configmaps", err)
		}
	}
	return nil
}
