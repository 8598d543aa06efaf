package server

import (
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Vendor strings. "KubeVirt" on purpose: Ironic switches into vendor quirks for names such as
// Dell, Lenovo or Supermicro.
const (
	manufacturer    = "KubeVirt"
	firmwareVersion = "kubevirt-redfish"
)

func systemURI(id string) string  { return redfish.SystemsURI + "/" + id }
func managerURI(id string) string { return redfish.ManagersURI + "/" + id }
func chassisURI(id string) string { return redfish.ChassisURI + "/" + id }

// systemResource renders a machine as a ComputerSystem.
func systemResource(m kubevirt.Machine) redfish.ComputerSystem {
	id := m.ID()
	f := kubevirt.FactsOf(m)
	uri := systemURI(id)
	cs := redfish.ComputerSystem{
		ODataID:      uri,
		ODataType:    redfish.TypeComputerSystem,
		Id:           id,
		Name:         m.VM.Name,
		Description:  "KubeVirt VirtualMachine " + m.VM.Namespace + "/" + m.VM.Name,
		SystemType:   "Virtual",
		Manufacturer: manufacturer,
		Model:        f.Model,
		SerialNumber: f.SerialNumber,
		UUID:         f.UUID,
		PowerState:   f.PowerState,
		Status:       f.Status,
		ProcessorSummary: redfish.ProcessorSummary{
			Count: f.Sockets, CoreCount: f.Cores, LogicalProcessorCount: f.Threads,
			Status: redfish.Status{State: "Enabled", Health: "OK"},
		},
		MemorySummary: redfish.MemorySummary{TotalSystemMemoryGiB: f.MemoryGiB, Status: redfish.Status{State: "Enabled", Health: "OK"}},
		Boot: redfish.Boot{
			BootSourceOverrideTarget:         f.Boot.Target,
			BootSourceOverrideTargetAllowed:  redfish.BootTargets,
			BootSourceOverrideEnabled:        f.Boot.Enabled,
			BootSourceOverrideEnabledAllowed: redfish.BootEnabledValues,
			BootSourceOverrideMode:           f.Boot.Mode,
			BootSourceOverrideModeAllowed:    redfish.BootModes,
		},
		VirtualMedia: redfish.Link{ODataID: mediaCollURI(id)},
		Links:        redfish.SystemLinks{ManagedBy: redfish.Links(managerURI(id)), Chassis: redfish.Links(chassisURI(id))},
		Actions: redfish.SystemActions{Reset: redfish.ResetAction{
			Target:           uri + "/Actions/ComputerSystem.Reset",
			ResetTypeAllowed: redfish.ResetTypes,
		}},
	}
	addInventory(&cs, m)
	return cs
}

// managerResource renders the virtual BMC of a machine.
func managerResource(m kubevirt.Machine) redfish.Manager {
	id := m.ID()
	return redfish.Manager{
		ODataID:         managerURI(id),
		ODataType:       redfish.TypeManager,
		Id:              id,
		Name:            "Manager for " + m.VM.Name,
		Description:     "kubevirt-redfish virtual BMC of " + m.VM.Namespace + "/" + m.VM.Name,
		ManagerType:     "BMC",
		Manufacturer:    manufacturer,
		Model:           "kubevirt-redfish",
		FirmwareVersion: firmwareVersion,
		PowerState:      redfish.PowerOn,
		Status:          redfish.Status{State: "Enabled", Health: "OK"},
		VirtualMedia:    redfish.Link{ODataID: managerURI(id) + "/VirtualMedia"},
		Links: redfish.ManagerLinks{
			ManagerForServers: redfish.Links(systemURI(id)),
			ManagerForChassis: redfish.Links(chassisURI(id)),
			ManagerInChassis:  redfish.Link{ODataID: chassisURI(id)},
		},
	}
}

// chassisResource renders the virtual enclosure of a machine.
func chassisResource(m kubevirt.Machine) redfish.Chassis {
	id := m.ID()
	f := kubevirt.FactsOf(m)
	return redfish.Chassis{
		ODataID:      chassisURI(id),
		ODataType:    redfish.TypeChassis,
		Id:           id,
		Name:         "Chassis of " + m.VM.Name,
		ChassisType:  "Other",
		Manufacturer: manufacturer,
		Model:        f.Model,
		SerialNumber: f.SerialNumber,
		UUID:         f.UUID,
		PowerState:   f.PowerState,
		Status:       f.Status,
		Links: redfish.ChassisLinks{
			ComputerSystems: redfish.Links(systemURI(id)),
			ManagedBy:       redfish.Links(managerURI(id)),
			ContainedBy:     nodeLink(m.Node()),
		},
	}
}
