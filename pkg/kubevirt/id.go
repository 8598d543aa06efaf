// Package kubevirt translates between KubeVirt objects and the Redfish view of them: pure
// functions that turn a VirtualMachine and its VirtualMachineInstance into power state, boot
// settings and inventory, and Redfish intents into patches; plus a thin client that reads from
// informer caches and writes those patches.
package kubevirt

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// SystemID is the Redfish id of a VM: "<namespace>.<name>".
func SystemID(namespace, name string) string { return namespace + "." + name }

// ParseSystemID splits a Redfish id at the first dot: namespaces hold no dots, VM names may.
// It reports false for anything that cannot name a VM, so callers answer 404.
func ParseSystemID(id string) (namespace, name string, ok bool) {
	i := strings.IndexByte(id, '.')
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	namespace, name = id[:i], id[i+1:]
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}
