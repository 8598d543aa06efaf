package kubevirt

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

var (
	secretResource    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// MediaRequest is a validated InsertMedia.
type MediaRequest struct {
	Image string
	// UserName and Password reach CDI in a Secret; they are never logged or shown.
	UserName, Password string
	Storage            Storage
	// PresentedCerts, PEM, are the certificates the image server presented (media
	// insecureTLS): CDI's import trusts them, from a ConfigMap, instead of Storage's CA bundle.
	PresentedCerts []byte
}

// caConfigMapSuffix names the ConfigMap of an image cache's presented certificates.
const caConfigMapSuffix = "-ca"

// DataVolume returns a cached DataVolume.
func (c *Client) DataVolume(ns, name string) (*cdiv1.DataVolume, bool) {
	nc := c.namespaces[ns]
	if nc == nil {
		return nil, false
	}
	obj, ok, _ := nc.dvs.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return nil, false
	}
	return obj.(*cdiv1.DataVolume), true
}

// MediaDataVolumes lists the per-VM media DataVolumes of every watched namespace.
func (c *Client) MediaDataVolumes() []*cdiv1.DataVolume {
	var out []*cdiv1.DataVolume
	for _, nc := range c.namespaces {
		for _, obj := range nc.dvs.GetIndexer().List() {
			if dv := obj.(*cdiv1.DataVolume); dv.Labels[MediaLabel] == "cd" {
				out = append(out, dv)
			}
		}
	}
	return out
}

// InsertMedia puts an image into the VM's virtual CD and returns without waiting for the
// download: CDI imports it (once per namespace and URL) and clones it for the VM, and the VM's
// next start waits for that. Inserting the image already inserted changes nothing; inserting
// another one replaces it, as swapping a disc would.
func (c *Client) InsertMedia(ctx context.Context, ns, name string, req MediaRequest) error {
	m, ok := c.Get(ns, name)
	if !ok {
		return ErrNotFound
	}
	cur := MediaOf(m)
	if cur.Inserted && cur.Image == req.Image {
		return nil
	}
	if err := c.ensureCache(ctx, ns, req); err != nil {
		return err
	}
	dv := MediaDataVolume(m.VM, req.Image, req.Storage)
	if err := c.create(ctx, DataVolumeResource, ns, dv); err != nil {
		return err
	}
	// The media the successful patch replaced is the one computed in its last attempt, not
	// what the cache showed before: a concurrent insert may have changed it meanwhile.
	var replaced string
	err := c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
		replaced = MediaOf(cur).DataVolume
		p := newVMPatch(cur.VM)
		p.setMedia(cur.VM, req.Image, dv.Name, c.CDROMHotplug)
		return p
	})
	if err != nil {
		return err
	}
	if replaced != "" && replaced != dv.Name {
		if err := c.deleteDataVolume(ctx, ns, replaced); err != nil {
			return err
		}
	}
	c.waitForDataVolume(ctx, ns, dv.Name, true)
	return nil
}

// EjectMedia empties the virtual CD: the disk leaves the VM and its DataVolume (with its PVC)
// is deleted. Ejecting an empty drive succeeds.
func (c *Client) EjectMedia(ctx context.Context, ns, name string) error {
	if _, ok := c.Get(ns, name); !ok {
		return ErrNotFound
	}
	var replaced string
	err := c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
		replaced = MediaOf(cur).DataVolume
		p := newVMPatch(cur.VM)
		p.setMedia(cur.VM, "", "", c.CDROMHotplug)
		return p
	})
	if err != nil || replaced == "" {
		return err
	}
	return c.deleteDataVolume(ctx, ns, replaced)
}

// ensureCache creates the namespace's import of the image, with its credentials Secret.
func (c *Client) ensureCache(ctx context.Context, ns string, req MediaRequest) error {
	name := CacheDataVolumeName(req.Image)
	if dv, ok := c.DataVolume(ns, name); ok && dv.DeletionTimestamp == nil {
		return c.markUsed(ctx, dv)
	}
	st := req.Storage
	if len(req.PresentedCerts) > 0 {
		st.CertConfigMap = name + caConfigMapSuffix
		cm := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: st.CertConfigMap, Namespace: ns, Labels: map[string]string{MediaLabel: "ca"}},
			Data:       map[string]string{"ca.pem": string(req.PresentedCerts)},
		}
		if err := c.create(ctx, configMapResource, ns, cm); err != nil {
			return err
		}
	}
	secret := ""
	if req.UserName != "" {
		secret = name + "-auth"
		s := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns, Labels: map[string]string{MediaLabel: "credentials"}},
			StringData: map[string]string{"accessKeyId": req.UserName, "secretKey": req.Password},
		}
		if err := c.create(ctx, secretResource, ns, s); err != nil {
			return err
		}
	}
	return c.create(ctx, DataVolumeResource, ns, CacheDataVolume(ns, req.Image, secret, st))
}

// create creates an object; one that already exists is fine (another replica or an earlier
// attempt made it).
func (c *Client) create(ctx context.Context, res schema.GroupVersionResource, ns string, obj any) error {
	u, err := ToUnstructured(obj)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(res).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	c.apiError("create_"+res.Resource, err)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s: %w", res.Resource, ns, u.GetName(), err)
	}
	return nil
}

func (c *Client) deleteDataVolume(ctx context.Context, ns, name string) error {
	bg := metav1.DeletePropagationBackground
	err := c.apiError("delete_datavolumes", c.dyn.Resource(DataVolumeResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting DataVolume %s/%s: %w", ns, name, err)
	}
	c.waitForDataVolume(ctx, ns, name, false)
	return nil
}

func (c *Client) waitForDataVolume(ctx context.Context, ns, name string, present bool) {
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, true, func(context.Context) (bool, error) {
		_, ok := c.DataVolume(ns, name)
		return ok == present, nil
	})
}
