package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Every hosting node that runs a VM the caller may see is a Chassis that Contains the VMs'
// chassis, and each running VM's chassis is ContainedBy its node: one view correlates tenant,
// VM, VMI and physical failure domain. Node chassis ids start with an upper-case prefix, which
// no namespace can, so they never collide with "<namespace>.<vm>".
const nodePrefix = "Node-"

func nodeChassisID(node string) string { return nodePrefix + node }

func nodeOfChassisID(id string) (string, bool) {
	node, ok := strings.CutPrefix(id, nodePrefix)
	return node, ok && node != ""
}

func nodeLink(node string) *redfish.Link {
	if node == "" {
		return nil
	}
	return &redfish.Link{ODataID: chassisURI(nodeChassisID(node))}
}

// hostingNodes lists, sorted and once each, the nodes the machines run on.
func hostingNodes(ms []kubevirt.Machine) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if n := m.Node(); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// nodeChassis renders a hosting node, listing only the VMs the caller may see; a node that
// runs none of them is 404, like anything else the caller may not see.
func (s *Server) nodeChassis(w http.ResponseWriter, r *http.Request, node string) {
	var contains []string
	for _, m := range s.visible(r) {
		if m.Node() == node {
			contains = append(contains, chassisURI(m.ID()))
		}
	}
	if len(contains) == 0 {
		writeError(w, redfish.ResourceNotFound("Chassis", nodeChassisID(node)))
		return
	}
	writeJSON(w, http.StatusOK, redfish.Chassis{
		ODataID:      chassisURI(nodeChassisID(node)),
		ODataType:    redfish.TypeChassis,
		Id:           nodeChassisID(node),
		Name:         node,
		ChassisType:  "Other",
		Manufacturer: manufacturer,
		Model:        "KubeVirt hosting node",
		PowerState:   redfish.PowerOn,
		Status:       redfish.Status{State: "Enabled", Health: "OK"},
		Links:        redfish.ChassisLinks{Contains: redfish.Links(contains...)},
	})
}
