package redfish

// PowerState is Resource.PowerState.
type PowerState string

// Power states a system reports.
const (
	PowerOn          PowerState = "On"
	PowerOff         PowerState = "Off"
	PowerPoweringOn  PowerState = "PoweringOn"
	PowerPoweringOff PowerState = "PoweringOff"
)

// ResetType is Resource.ResetType.
type ResetType string

// Reset types we accept. Nmi is left out: KubeVirt has no way to inject an NMI into a guest.
const (
	ResetOn               ResetType = "On"
	ResetForceOff         ResetType = "ForceOff"
	ResetGracefulShutdown ResetType = "GracefulShutdown"
	ResetForceRestart     ResetType = "ForceRestart"
	ResetGracefulRestart  ResetType = "GracefulRestart"
	ResetPushPowerButton  ResetType = "PushPowerButton"
)

// ResetTypes lists the accepted reset types in the order they are advertised.
var ResetTypes = []ResetType{ResetOn, ResetForceOff, ResetGracefulShutdown, ResetForceRestart, ResetGracefulRestart, ResetPushPowerButton}

// BootTarget is ComputerSystem.BootSource.
type BootTarget string

// Boot targets we map onto KubeVirt boot orders.
const (
	BootNone BootTarget = "None"
	BootPxe  BootTarget = "Pxe"
	BootHdd  BootTarget = "Hdd"
	BootCd   BootTarget = "Cd"
)

// BootTargets lists the accepted override targets.
var BootTargets = []BootTarget{BootNone, BootPxe, BootHdd, BootCd}

// BootEnabled is ComputerSystem.BootSourceOverrideEnabled.
type BootEnabled string

// Override persistence values.
const (
	BootDisabled   BootEnabled = "Disabled"
	BootOnce       BootEnabled = "Once"
	BootContinuous BootEnabled = "Continuous"
)

// BootEnabledValues lists the accepted override persistence values.
var BootEnabledValues = []BootEnabled{BootDisabled, BootOnce, BootContinuous}

// BootMode is ComputerSystem.BootSourceOverrideMode.
type BootMode string

// Firmware modes: UEFI is KubeVirt's EFI bootloader, Legacy its BIOS.
const (
	BootUEFI   BootMode = "UEFI"
	BootLegacy BootMode = "Legacy"
)

// BootModes lists the accepted firmware modes.
var BootModes = []BootMode{BootUEFI, BootLegacy}

// Contains reports whether v is one of list.
func Contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
