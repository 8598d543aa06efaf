package kubevirt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Virtual media is a CD-ROM disk named MediaDevice whose volume is a CDI DataVolume. Each
// image is downloaded once per namespace into an "image cache" DataVolume; every VM that
// inserts it gets its own CDI clone of that cache, owned by the VM so it dies with it.
const (
	// MediaDevice names the CD-ROM disk and its volume on the VM.
	MediaDevice = "redfish-cd"
	// MediaAnnotation on the VM records what is inserted (image URL and DataVolume), so the
	// next GET shows it at once, before any import has begun.
	MediaAnnotation = "redfish.kubevirt.io/media"
	// ImageAnnotation on the DataVolumes names the image URL they hold.
	ImageAnnotation = "redfish.kubevirt.io/image"
	// MediaLabel marks our DataVolumes: "cache" for image caches, "cd" for per-VM media.
	MediaLabel = "redfish.kubevirt.io/media"
	// VMLabel on a per-VM media DataVolume names its VM.
	VMLabel = "redfish.kubevirt.io/vm"
	// bindImmediate asks CDI to bind WaitForFirstConsumer storage at once: the importer must
	// run before any VMI exists, or an import and the power-on that waits for it deadlock.
	bindImmediate = "cdi.kubevirt.io/storage.bind.immediate.requested"
)

// DataVolumeResource is CDI's DataVolume.
var DataVolumeResource = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}

// mediaState is the JSON of MediaAnnotation.
type mediaState struct {
	Image      string `json:"image"`
	DataVolume string `json:"dataVolume"`
}

// Media is the Redfish view of a VM's virtual CD.
type Media struct {
	Inserted   bool
	Image      string
	ImageName  string
	DataVolume string
	// PendingRestart is true when the media was changed while the VM runs: KubeVirt applies
	// volume changes at the next start.
	PendingRestart bool
}

// MediaOf reads what is inserted in the VM's virtual CD.
func MediaOf(m Machine) Media {
	raw, ok := m.VM.Annotations[MediaAnnotation]
	if !ok {
		return Media{}
	}
	var s mediaState
	if json.Unmarshal([]byte(raw), &s) != nil || s.Image == "" {
		return Media{}
	}
	out := Media{Inserted: true, Image: s.Image, ImageName: imageName(s.Image), DataVolume: s.DataVolume}
	if m.VMI != nil && !isFinal(m.VMI) && vmiMediaVolume(m.VMI) != s.DataVolume {
		out.PendingRestart = true
	}
	return out
}

func vmiMediaVolume(vmi *virtv1.VirtualMachineInstance) string {
	for _, v := range vmi.Spec.Volumes {
		if v.Name == MediaDevice && v.DataVolume != nil {
			return v.DataVolume.Name
		}
	}
	return ""
}

func imageName(image string) string {
	u, err := url.Parse(image)
	if err != nil {
		return ""
	}
	return path.Base(u.Path)
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// CacheDataVolumeName is the image cache DataVolume of a URL in a namespace.
func CacheDataVolumeName(image string) string { return "redfish-image-" + shortHash(image, 16) }

// MediaDataVolumeName names a VM's media DataVolume for a URL. Each insert gets a fresh name
// (a random suffix): reusing one could pick up a DataVolume of an earlier insert that is
// still being deleted, leaving the VM pointing at a volume about to vanish. It stays within 63
// characters, since CDI derives pod and label values from it.
func MediaDataVolumeName(vm, image string) string {
	if len(vm) > 40 {
		vm = vm[:40]
	}
	return vm + "-cd-" + shortHash(vm+"\x00"+image, 10) + "-" + utilrand.String(5)
}

// Storage says where and how large imported images are.
type Storage struct {
	Size          resource.Quantity
	StorageClass  string
	AccessModes   []corev1.PersistentVolumeAccessMode
	VolumeMode    *corev1.PersistentVolumeMode
	CertConfigMap string
}

func (st Storage) spec() *cdiv1.StorageSpec {
	s := &cdiv1.StorageSpec{
		AccessModes: st.AccessModes,
		VolumeMode:  st.VolumeMode,
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: st.Size}},
	}
	if st.StorageClass != "" {
		s.StorageClassName = &st.StorageClass
	}
	return s
}

// CacheDataVolume imports image once for the namespace. secret, when set, names the Secret
// holding the image server credentials.
func CacheDataVolume(ns, image, secret string, st Storage) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name: CacheDataVolumeName(image), Namespace: ns,
			Labels:      map[string]string{MediaLabel: "cache"},
			Annotations: map[string]string{ImageAnnotation: image, bindImmediate: "true"},
		},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{
				URL: image, SecretRef: secret, CertConfigMap: st.CertConfigMap,
			}},
			Storage: st.spec(),
		},
	}
}

// MediaDataVolume clones the namespace's image cache into the VM's own disk, owned by the VM.
func MediaDataVolume(vm *virtv1.VirtualMachine, image string, st Storage) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name: MediaDataVolumeName(vm.Name, image), Namespace: vm.Namespace,
			Labels:          map[string]string{MediaLabel: "cd", VMLabel: vm.Name},
			Annotations:     map[string]string{ImageAnnotation: image, bindImmediate: "true"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)},
		},
		Spec: cdiv1.DataVolumeSpec{
			Source:  &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: vm.Namespace, Name: CacheDataVolumeName(image)}},
			Storage: st.spec(),
		},
	}
}

// mediaDevices returns the VM's disks and volumes with the media device set to dv ("" removes
// it), and whether anything changed.
func withMedia(vm *virtv1.VirtualMachine, dv string) *virtv1.VirtualMachine {
	out := vm.DeepCopy()
	spec := &out.Spec.Template.Spec
	var disks []virtv1.Disk
	for _, d := range spec.Domain.Devices.Disks {
		if d.Name != MediaDevice {
			disks = append(disks, d)
		}
	}
	var vols []virtv1.Volume
	for _, v := range spec.Volumes {
		if v.Name != MediaDevice {
			vols = append(vols, v)
		}
	}
	if dv != "" {
		ro := true
		disks = append(disks, virtv1.Disk{Name: MediaDevice, DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA, ReadOnly: &ro}}})
		vols = append(vols, virtv1.Volume{Name: MediaDevice, VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: dv}}})
	}
	spec.Domain.Devices.Disks, spec.Volumes = disks, vols
	return out
}

// setMedia adds to the patch what inserting dv holding image (or ejecting, with dv "")
// changes: the CD-ROM disk and its volume, the media annotation, and boot orders recomputed over
// the new device list so that a Cd override selects the new CD-ROM. Operations address single
// list members, so fields of newer KubeVirt versions on other disks survive.
//
// With hotplug (KubeVirt's DeclarativeHotplugVolumes), the volume is marked hotpluggable and an
// eject keeps the CD-ROM disk as an empty tray, so that KubeVirt can swap the media of a running
// VM; without it, both leave the VM and changes apply at the next start.
func (p *jsonPatch) setMedia(vm *virtv1.VirtualMachine, image, dv string, hotplug bool) {
	mediaKey := "disk/" + MediaDevice
	keepDisk := dv != "" || hotplug
	next := withMedia(vm, dv)
	if keepDisk {
		next = withMedia(vm, MediaDevice) // only the device list matters here
	}
	var orders map[string]uint
	if s := readBootState(vm); s != nil {
		orders = ComputeOrders(devices(next), s.Target, s.Original)
	}
	if !keepDisk {
		delete(orders, mediaKey)
	}
	p.setBootOrders(vm, orders) // index-addressed: before any removal shifts the lists
	spec := vm.Spec.Template.Spec
	diskIdx, volIdx := -1, -1
	for i, d := range spec.Domain.Devices.Disks {
		if d.Name == MediaDevice {
			diskIdx = i
		}
	}
	for i, v := range spec.Volumes {
		if v.Name == MediaDevice {
			volIdx = i
		}
	}
	media := withMedia(&virtv1.VirtualMachine{Spec: virtv1.VirtualMachineSpec{Template: &virtv1.VirtualMachineInstanceTemplateSpec{}}}, MediaDevice)
	disk, vol := media.Spec.Template.Spec.Domain.Devices.Disks[0], media.Spec.Template.Spec.Volumes[0]
	if o := orders[mediaKey]; o > 0 {
		disk.BootOrder = &o
	}
	if diskIdx < 0 && keepDisk {
		p.add(domainPath+"/devices/disks/-", disk)
	}
	if dv == "" {
		if diskIdx >= 0 && !keepDisk {
			p.remove(domainPath + "/devices/disks/" + itoa(diskIdx))
		}
		if volIdx >= 0 {
			p.remove("/spec/template/spec/volumes/" + itoa(volIdx))
		}
		if _, ok := vm.Annotations[MediaAnnotation]; ok {
			p.remove("/metadata/annotations/" + escape(MediaAnnotation))
		}
		return
	}
	vol.DataVolume = &virtv1.DataVolumeSource{Name: dv, Hotpluggable: hotplug}
	if volIdx < 0 {
		p.add("/spec/template/spec/volumes/-", vol)
	} else {
		p.replace("/spec/template/spec/volumes/"+itoa(volIdx), vol)
	}
	p.setAnnotation(vm, MediaAnnotation, mustJSON(mediaState{Image: image, DataVolume: dv}))
}
