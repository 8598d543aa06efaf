package sim

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// ControlPlaneVM returns a VirtualMachine shaped like a virtualized OpenShift control-plane
// node: pinned MAC and firmware UUID, an empty 120 GiB root disk from a DataVolume template, a
// pod network interface, powered off.
func ControlPlaneVM(ns, name string, index int) *virtv1.VirtualMachine {
	halted := virtv1.RunStrategyHalted
	return &virtv1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			UID:    types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", index+1)),
			Labels: map[string]string{"cluster": ns, "role": "control-plane"},
		},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			// An empty 120 GiB root disk, as installers expect of a control-plane node.
			DataVolumeTemplates: []virtv1.DataVolumeTemplateSpec{{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-rootdisk"},
				Spec: cdiv1.DataVolumeSpec{
					Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
					Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("120Gi")},
					}},
				},
			}},
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cluster": ns, "role": "control-plane"}},
				Spec: virtv1.VirtualMachineInstanceSpec{
					Domain: virtv1.DomainSpec{
						CPU:    &virtv1.CPU{Sockets: 1, Cores: 4, Threads: 1},
						Memory: &virtv1.Memory{Guest: resource.NewQuantity(16<<30, resource.BinarySI)},
						Firmware: &virtv1.Firmware{
							UUID:       types.UID(fmt.Sprintf("5f1e6a3c-0000-4000-9000-%012d", index+1)),
							Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: new(bool)}},
						},
						Devices: virtv1.Devices{
							Disks: []virtv1.Disk{{Name: "rootdisk", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}}},
							Interfaces: []virtv1.Interface{{
								Name:                   "default",
								MacAddress:             fmt.Sprintf("02:00:00:00:00:%02x", index+1),
								InterfaceBindingMethod: virtv1.InterfaceBindingMethod{Bridge: &virtv1.InterfaceBridge{}},
							}},
						},
					},
					Networks: []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}},
					Volumes: []virtv1.Volume{{Name: "rootdisk", VolumeSource: virtv1.VolumeSource{
						DataVolume: &virtv1.DataVolumeSource{Name: name + "-rootdisk"},
					}}},
				},
			},
		},
	}
}

// ToUnstructured converts a typed object for the dynamic client.
var ToUnstructured = kubevirt.ToUnstructured

// DemoNamespaces are the namespaces the demo cluster holds.
var DemoNamespaces = []string{"tenant-a", "tenant-b"}

// DemoVMs are the VMs of the demo: tenant-a/cp-0..2 and tenant-b/cp-0, all powered off.
func DemoVMs() []*virtv1.VirtualMachine {
	vms := make([]*virtv1.VirtualMachine, 0, 4)
	for i := 0; i < 3; i++ {
		vms = append(vms, ControlPlaneVM("tenant-a", fmt.Sprintf("cp-%d", i), i))
	}
	return append(vms, ControlPlaneVM("tenant-b", "cp-0", 10))
}

// NewDemoCluster returns an in-memory cluster (client-go's fake dynamic client) holding the
// DemoVMs.
func NewDemoCluster() (dynamic.Interface, error) {
	var objs []runtime.Object
	for _, vm := range DemoVMs() {
		u, err := ToUnstructured(vm)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kubevirt.VMResource:         "VirtualMachineList",
		kubevirt.VMIResource:        "VirtualMachineInstanceList",
		kubevirt.DataVolumeResource: "DataVolumeList",
		PVCResource:                 "PersistentVolumeClaimList",
		SecretResource:              "SecretList",
		ConfigMapResource:           "ConfigMapList",
	}, objs...), nil
}
