package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// The inventory below a ComputerSystem: processors, network interfaces, disks (as
// SimpleStorage and as Storage with drives, volumes and controllers), Secure Boot and the
// firmware (Bios). Every value comes from kubevirt's inventory facts; a fact nobody states is
// left out.

// storageID is the one storage subsystem (and simple storage controller) of a system: the
// VM's virtual disks.
const storageID = "1"

func processorsURI(id string) string    { return systemURI(id) + "/Processors" }
func ethernetURI(id string) string      { return systemURI(id) + "/EthernetInterfaces" }
func simpleStorageURI(id string) string { return systemURI(id) + "/SimpleStorage" }
func storageCollURI(id string) string   { return systemURI(id) + "/Storage" }
func storageURI(id string) string       { return storageCollURI(id) + "/" + storageID }
func drivesURI(id string) string        { return chassisURI(id) + "/Drives" }
func volumesURI(id string) string       { return storageURI(id) + "/Volumes" }
func controllersURI(id string) string   { return storageURI(id) + "/Controllers" }
func secureBootURI(id string) string    { return systemURI(id) + "/SecureBoot" }
func biosURI(id string) string          { return systemURI(id) + "/Bios" }

// inventoryRoutes are the routes of the inventory resources.
func (s *Server) inventoryRoutes() []route {
	const sys = "/redfish/v1/Systems/{id}"
	return []route{
		{pattern: sys + "/Processors", methods: get(s.processors)},
		{pattern: sys + "/Processors/{member}", methods: get(s.processor)},
		{pattern: sys + "/EthernetInterfaces", methods: get(s.ethernetInterfaces)},
		{pattern: sys + "/EthernetInterfaces/{member}", methods: get(s.ethernetInterface)},
		{pattern: sys + "/SimpleStorage", methods: get(s.simpleStorageCollection)},
		{pattern: sys + "/SimpleStorage/{member}", methods: get(s.simpleStorage)},
		{pattern: sys + "/Storage", methods: get(s.storageCollection)},
		{pattern: sys + "/Storage/{storage}", methods: get(s.storage)},
		{pattern: sys + "/Storage/{storage}/Volumes", methods: get(s.volumeCollection)},
		{pattern: sys + "/Storage/{storage}/Volumes/{member}", methods: get(s.volume)},
		{pattern: sys + "/Storage/{storage}/Controllers", methods: get(s.controllerCollection)},
		{pattern: sys + "/Storage/{storage}/Controllers/{member}", methods: get(s.controller)},
		{pattern: sys + "/SecureBoot", methods: map[string]http.HandlerFunc{
			http.MethodGet: s.secureBoot, http.MethodPatch: s.patchSecureBoot}},
		{pattern: sys + "/Bios", methods: get(s.bios)},
		// Drives live in the chassis, where DSP8010 2025.4 puts them (Storage/{id}/Drives/{id}
		// is deprecated); Storage.Drives links them.
		{pattern: "/redfish/v1/Chassis/{id}/Drives/{member}", methods: get(s.drive)},
		{pattern: sys + "/Bios/Settings", methods: map[string]http.HandlerFunc{
			http.MethodGet: s.biosSettings, http.MethodPatch: s.patchBiosSettings}},
	}
}

var enabledOK = redfish.Status{State: "Enabled", Health: "OK"}

// addInventory adds to a ComputerSystem its inventory links, firmware version and indicator.
func addInventory(cs *redfish.ComputerSystem, m kubevirt.Machine) {
	id := m.ID()
	led := kubevirt.IndicatorLEDOf(m.VM)
	cs.BiosVersion = kubevirt.BiosVersion(kubevirt.CurrentFirmwareOf(m))
	cs.IndicatorLED, cs.IndicatorLEDAllowed = led, redfish.IndicatorLEDs
	cs.LocationIndicatorActive = led != redfish.LEDOff
	cs.WriteableProperties = []string{"IndicatorLED", "LocationIndicatorActive"}
	cs.Boot.WriteableProperties = []string{"BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode"}
	cs.Processors = redfish.Link{ODataID: processorsURI(id)}
	cs.EthernetInterfaces = redfish.Link{ODataID: ethernetURI(id)}
	cs.SimpleStorage = redfish.Link{ODataID: simpleStorageURI(id)}
	cs.Storage = redfish.Link{ODataID: storageCollURI(id)}
	cs.SecureBoot = redfish.Link{ODataID: secureBootURI(id)}
	cs.Bios = redfish.Link{ODataID: biosURI(id)}
	if ps := kubevirt.ProcessorsOf(m); len(ps) > 0 && ps[0].Model != "" {
		cs.ProcessorSummary.Model = ps[0].Model
	}
}

// member answers 404 for a member id that is not one of ids.
func member(w http.ResponseWriter, r *http.Request, typ string, ids []string) (string, bool) {
	want := chi.URLParam(r, "member")
	for _, id := range ids {
		if id == want {
			return id, true
		}
	}
	writeError(w, redfish.ResourceNotFound(typ, want))
	return "", false
}

// --- Processors ---

func processorID(p kubevirt.ProcessorFacts) string { return strconv.Itoa(p.Socket) }

func (s *Server) processors(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "ProcessorCollection")
	if !ok {
		return
	}
	var uris []string
	for _, p := range kubevirt.ProcessorsOf(m) {
		uris = append(uris, processorsURI(m.ID())+"/"+processorID(p))
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(processorsURI(m.ID()), redfish.TypeProcessorColl, "Processor Collection", uris))
}

func (s *Server) processor(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "Processor")
	if !ok {
		return
	}
	want := chi.URLParam(r, "member")
	for _, p := range kubevirt.ProcessorsOf(m) {
		if processorID(p) == want {
			writeJSON(w, http.StatusOK, processorResource(m, p))
			return
		}
	}
	writeError(w, redfish.ResourceNotFound("Processor", want))
}

func processorResource(m kubevirt.Machine, p kubevirt.ProcessorFacts) redfish.Processor {
	id := processorID(p)
	return redfish.Processor{
		ODataID: processorsURI(m.ID()) + "/" + id, ODataType: redfish.TypeProcessor, Id: id,
		Name:                  "Processor " + id,
		Description:           "Virtual CPU socket " + id + " of the KubeVirt VirtualMachine",
		Socket:                id,
		ProcessorType:         "CPU",
		ProcessorArchitecture: p.Architecture,
		InstructionSet:        p.InstructionSet,
		Model:                 p.Model,
		TotalCores:            p.Cores,
		TotalEnabledCores:     p.Cores,
		TotalThreads:          p.Threads,
		Status:                enabledOK,
	}
}

// --- EthernetInterfaces ---

func (s *Server) ethernetInterfaces(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "EthernetInterfaceCollection")
	if !ok {
		return
	}
	var uris []string
	for _, n := range kubevirt.NICsOf(m) {
		uris = append(uris, ethernetURI(m.ID())+"/"+n.Name)
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(ethernetURI(m.ID()), redfish.TypeEthernetInterfaceColl, "Ethernet Interface Collection", uris))
}

func (s *Server) ethernetInterface(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "EthernetInterface")
	if !ok {
		return
	}
	want := chi.URLParam(r, "member")
	for _, n := range kubevirt.NICsOf(m) {
		if n.Name == want {
			writeJSON(w, http.StatusOK, ethernetResource(m, n))
			return
		}
	}
	writeError(w, redfish.ResourceNotFound("EthernetInterface", want))
}

func ethernetResource(m kubevirt.Machine, n kubevirt.NIC) redfish.EthernetInterface {
	desc := "KubeVirt interface " + n.Name + " on network " + n.Network
	if n.Model != "" {
		desc += " (" + n.Model + ")"
	}
	e := redfish.EthernetInterface{
		ODataID: ethernetURI(m.ID()) + "/" + n.Name, ODataType: redfish.TypeEthernetInterface, Id: n.Name,
		Name:                n.Name,
		Description:         desc,
		MACAddress:          n.MAC,
		PermanentMACAddress: n.PermanentMAC,
		InterfaceEnabled:    true,
		LinkStatus:          n.LinkStatus,
		IPv4Addresses:       []redfish.IPv4Address{},
		IPv6Addresses:       []redfish.IPv6Address{},
		Status:              enabledOK,
		Links:               redfish.ChassisLinkOnly{Chassis: redfish.Link{ODataID: chassisURI(m.ID())}},
	}
	for _, a := range n.IPv4 {
		e.IPv4Addresses = append(e.IPv4Addresses, redfish.IPv4Address{Address: a})
	}
	for _, a := range n.IPv6 {
		e.IPv6Addresses = append(e.IPv6Addresses, ipv6Address(a))
	}
	return e
}

func ipv6Address(s string) redfish.IPv6Address {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			if n, err := strconv.Atoi(s[i+1:]); err == nil && n >= 0 && n <= 128 {
				return redfish.IPv6Address{Address: s[:i], PrefixLength: &n}
			}
			return redfish.IPv6Address{Address: s[:i]}
		}
	}
	return redfish.IPv6Address{Address: s}
}

// --- Disks ---

// disks lists a machine's disks with their DataVolumes from the cache.
func (s *Server) disks(m kubevirt.Machine) []kubevirt.DiskFacts {
	ns := m.VM.Namespace
	return kubevirt.DisksOf(m, func(name string) (*cdiv1.DataVolume, bool) { return s.backend.DataVolume(ns, name) })
}

// diskStatus is Enabled/OK, Critical when the DataVolume behind the disk failed.
func diskStatus(d kubevirt.DiskFacts) redfish.Status {
	st := enabledOK
	if d.DataVolumePhase == cdiv1.Failed {
		st.Health = "Critical"
	}
	return st
}

// shownCapacity is the capacity a disk reports. A CD-ROM reports none: the size of the medium
// in it is no disk capacity, and Ironic takes the smallest enabled device of at least 4 GiB
// as the node's local disk.
func shownCapacity(d kubevirt.DiskFacts) *int64 {
	if d.Kind == kubevirt.KindCDROM {
		return nil
	}
	return d.CapacityBytes
}

// storageDisks are the disks Storage lists as drives and volumes: those with a known capacity.
// sushy sorts the capacities of all drives and volumes to find the local disk, and a drive
// without CapacityBytes makes that (and Ironic's inspection) fail with a TypeError.
func storageDisks(all []kubevirt.DiskFacts) []kubevirt.DiskFacts {
	var out []kubevirt.DiskFacts
	for _, d := range all {
		if shownCapacity(d) != nil {
			out = append(out, d)
		}
	}
	return out
}

func diskDescription(d kubevirt.DiskFacts) string {
	kind := map[string]string{kubevirt.KindDisk: "disk", kubevirt.KindCDROM: "CD-ROM drive", kubevirt.KindLUN: "LUN"}[d.Kind]
	desc := kind
	if d.Bus != "" {
		desc = d.Bus + " " + kind
	}
	switch {
	case d.Claim != "":
		desc += " backed by " + d.Source + " " + d.Claim
	case d.Source != "":
		desc += " backed by a " + d.Source + " volume"
	}
	return desc
}

func (s *Server) simpleStorageCollection(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "SimpleStorageCollection")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(simpleStorageURI(m.ID()), redfish.TypeSimpleStorageColl,
		"Simple Storage Collection", []string{simpleStorageURI(m.ID()) + "/" + storageID}))
}

func (s *Server) simpleStorage(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "SimpleStorage")
	if !ok {
		return
	}
	if _, ok := member(w, r, "SimpleStorage", []string{storageID}); !ok {
		return
	}
	writeJSON(w, http.StatusOK, simpleStorageResource(m, s.disks(m)))
}

func simpleStorageResource(m kubevirt.Machine, disks []kubevirt.DiskFacts) redfish.SimpleStorage {
	ss := redfish.SimpleStorage{
		ODataID: simpleStorageURI(m.ID()) + "/" + storageID, ODataType: redfish.TypeSimpleStorage, Id: storageID,
		Name:        "Virtual disks",
		Description: "The disks of the KubeVirt VirtualMachine; CD-ROM drives are named so and report no capacity",
		Devices:     []redfish.SimpleDevice{},
		Status:      enabledOK,
		Links:       redfish.ChassisLinkOnly{Chassis: redfish.Link{ODataID: chassisURI(m.ID())}},
	}
	for _, d := range disks {
		name := d.Name
		switch d.Kind {
		case kubevirt.KindCDROM:
			name += " (CD-ROM)"
		case kubevirt.KindLUN:
			name += " (LUN)"
		}
		ss.Devices = append(ss.Devices, redfish.SimpleDevice{Name: name, CapacityBytes: shownCapacity(d), Status: diskStatus(d)})
	}
	return ss
}

// storageMember checks the {storage} id.
func storageMember(w http.ResponseWriter, r *http.Request) bool {
	if got := chi.URLParam(r, "storage"); got != storageID {
		writeError(w, redfish.ResourceNotFound("Storage", got))
		return false
	}
	return true
}

func (s *Server) storageCollection(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "StorageCollection")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(storageCollURI(m.ID()), redfish.TypeStorageColl,
		"Storage Collection", []string{storageURI(m.ID())}))
}

func (s *Server) storage(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "Storage")
	if !ok || !storageMember(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, storageResource(m, s.disks(m)))
}

func storageResource(m kubevirt.Machine, all []kubevirt.DiskFacts) redfish.Storage {
	id := m.ID()
	st := redfish.Storage{
		ODataID: storageURI(id), ODataType: redfish.TypeStorage, Id: storageID,
		Name:        "Virtual disks",
		Description: "The disks of the KubeVirt VirtualMachine whose size is known (from a DataVolume, a dataVolumeTemplate, the running VMI, or an emptyDisk or hostDisk capacity)",
		Drives:      []redfish.Link{},
		Controllers: redfish.Link{ODataID: controllersURI(id)},
		Volumes:     redfish.Link{ODataID: volumesURI(id)},
		Status:      enabledOK,
		Links:       redfish.StorageLinks{Enclosures: redfish.Links(chassisURI(id))},
	}
	for _, d := range storageDisks(all) {
		st.Drives = append(st.Drives, redfish.Link{ODataID: drivesURI(id) + "/" + d.Name})
	}
	st.DrivesCount = len(st.Drives)
	return st
}

func names(disks []kubevirt.DiskFacts) []string {
	out := make([]string, len(disks))
	for i, d := range disks {
		out[i] = d.Name
	}
	return out
}

func findDisk(disks []kubevirt.DiskFacts, name string) kubevirt.DiskFacts {
	for _, d := range disks {
		if d.Name == name {
			return d
		}
	}
	return kubevirt.DiskFacts{}
}

// driveProtocol is the Redfish protocol of a disk bus; nil when Redfish has no value for it
// (virtio and virtio-scsi).
func driveProtocol(bus string) *string {
	var p string
	switch bus {
	case "sata":
		p = "SATA"
	case "usb":
		p = "USB"
	default:
		return nil
	}
	return &p
}

func (s *Server) drive(w http.ResponseWriter, r *http.Request) {
	if m, d, ok := s.storageDisk(w, r, "Drive"); ok {
		writeJSON(w, http.StatusOK, driveResource(m, d))
	}
}

// storageDisk resolves the machine and the storage disk a Drive or Volume URL names; on any
// failure it has answered 404.
func (s *Server) storageDisk(w http.ResponseWriter, r *http.Request, typ string) (kubevirt.Machine, kubevirt.DiskFacts, bool) {
	m, ok := s.machine(w, r, typ)
	if !ok {
		return m, kubevirt.DiskFacts{}, false
	}
	disks := storageDisks(s.disks(m))
	name, ok := member(w, r, typ, names(disks))
	if !ok {
		return m, kubevirt.DiskFacts{}, false
	}
	return m, findDisk(disks, name), true
}

func driveResource(m kubevirt.Machine, d kubevirt.DiskFacts) redfish.Drive {
	id := m.ID()
	return redfish.Drive{
		ODataID: drivesURI(id) + "/" + d.Name, ODataType: redfish.TypeDrive, Id: d.Name,
		Name:          d.Name,
		Description:   diskDescription(d),
		CapacityBytes: shownCapacity(d),
		// HDD, SSD or SMR: a virtual disk is none the VM can tell.
		MediaType: nil,
		Protocol:  driveProtocol(d.Bus),
		Status:    diskStatus(d),
		Links: redfish.DriveLinks{
			Volumes: redfish.Links(volumesURI(id) + "/" + d.Name),
			Chassis: redfish.Link{ODataID: chassisURI(id)},
		},
	}
}

func (s *Server) volumeCollection(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "VolumeCollection")
	if !ok || !storageMember(w, r) {
		return
	}
	var uris []string
	for _, d := range storageDisks(s.disks(m)) {
		uris = append(uris, volumesURI(m.ID())+"/"+d.Name)
	}
	writeJSON(w, http.StatusOK, redfish.VolumeCollection{
		Collection: redfish.NewCollection(volumesURI(m.ID()), redfish.TypeVolumeColl, "Volume Collection", uris),
		// Volumes are the VM's volumes; Redfish creates and deletes none, so no apply time
		// can be asked for.
		ApplyTimes: redfish.OperationApplyTimeSupport{ODataType: redfish.TypeOperationApplyTimeSupport, SupportedValues: []string{}},
	})
}

func (s *Server) volume(w http.ResponseWriter, r *http.Request) {
	// The storage id is the same for every system, so checking it first tells nothing about
	// which systems exist.
	if !storageMember(w, r) {
		return
	}
	if m, d, ok := s.storageDisk(w, r, "Volume"); ok {
		writeJSON(w, http.StatusOK, volumeResource(m, d))
	}
}

// volumeResource renders the volume behind a drive: the DataVolume or PVC (or the emptyDisk
// or hostDisk image) the disk is, with the same size.
func volumeResource(m kubevirt.Machine, d kubevirt.DiskFacts) redfish.Volume {
	id := m.ID()
	desc := "The " + d.Source + " volume of disk " + d.Name
	if d.Claim != "" {
		desc = "The " + d.Source + " " + d.Claim + " of disk " + d.Name
	}
	return redfish.Volume{
		ODataID: volumesURI(id) + "/" + d.Name, ODataType: redfish.TypeVolume, Id: d.Name,
		Name:          d.Name,
		Description:   desc,
		CapacityBytes: *shownCapacity(d),
		Status:        diskStatus(d),
		Links:         redfish.VolumeLinks{Drives: redfish.Links(drivesURI(id) + "/" + d.Name)},
	}
}

// buses lists the disk buses in use, in first-use order: each is a storage controller.
func buses(disks []kubevirt.DiskFacts) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range disks {
		if d.Bus != "" && !seen[d.Bus] {
			seen[d.Bus] = true
			out = append(out, d.Bus)
		}
	}
	return out
}

func (s *Server) controllerCollection(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "StorageControllerCollection")
	if !ok || !storageMember(w, r) {
		return
	}
	var uris []string
	for _, b := range buses(s.disks(m)) {
		uris = append(uris, controllersURI(m.ID())+"/"+b)
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(controllersURI(m.ID()), redfish.TypeStorageControllerColl, "Storage Controller Collection", uris))
}

func (s *Server) controller(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "StorageController")
	if !ok || !storageMember(w, r) {
		return
	}
	bus, ok := member(w, r, "StorageController", buses(s.disks(m)))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, controllerResource(m, bus))
}

// controllerResource renders a disk bus. It has no RAID: SupportedRAIDTypes is empty.
func controllerResource(m kubevirt.Machine, bus string) redfish.StorageController {
	c := redfish.StorageController{
		ODataID: controllersURI(m.ID()) + "/" + bus, ODataType: redfish.TypeStorageController, Id: bus,
		Name:               bus + " disk bus",
		Description:        "The " + bus + " bus the KubeVirt VirtualMachine attaches disks to",
		SupportedRAIDTypes: []string{},
		Status:             enabledOK,
	}
	if p := driveProtocol(bus); p != nil {
		c.SupportedDeviceProtocols = []string{*p}
	}
	return c
}

// --- SecureBoot ---

func (s *Server) secureBoot(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.machine(w, r, "SecureBoot"); ok {
		writeJSON(w, http.StatusOK, secureBootResource(m))
	}
}

func secureBootResource(m kubevirt.Machine) redfish.SecureBoot {
	f := kubevirt.FirmwareOf(m)
	sb := redfish.SecureBoot{
		ODataID: secureBootURI(m.ID()), ODataType: redfish.TypeSecureBoot, Id: "SecureBoot",
		Name:                "UEFI Secure Boot",
		Description:         "UEFI Secure Boot of the KubeVirt VirtualMachine; a change applies at its next start.",
		SecureBootEnable:    f.SecureBoot,
		SecureBootMode:      kubevirt.SecureBootMode(f),
		WriteableProperties: []string{"SecureBootEnable"},
	}
	if f.Mode != redfish.BootUEFI {
		sb.Description = "The KubeVirt VirtualMachine boots with BIOS (Legacy); UEFI Secure Boot needs the UEFI boot mode."
		sb.WriteableProperties = []string{}
	}
	if f.SecureBootCurrent != nil {
		sb.SecureBootCurrentBoot = map[bool]string{true: "Enabled", false: "Disabled"}[*f.SecureBootCurrent]
	}
	return sb
}

// secureBootReadOnly are the SecureBoot properties a PATCH may not set.
var secureBootReadOnly = jsonKeys(redfish.SecureBoot{})

// decodeSecureBootPatch validates a SecureBoot PATCH: SecureBootEnable, a boolean, is the one
// writable property. Every problem is reported at once.
func decodeSecureBootPatch(body []byte) (bool, *redfish.Error) {
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return false, rerr
	}
	var errs []*redfish.Error
	enable, set := false, false
	for k, v := range obj {
		switch {
		case isAnnotation(k):
		case k == "SecureBootEnable":
			b, ok := v.(bool)
			if !ok {
				errs = append(errs, redfish.PropertyValueTypeError(show(v), k))
				continue
			}
			enable, set = b, true
		case secureBootReadOnly[k] || k == "Actions":
			errs = append(errs, redfish.PropertyNotWritable(k))
		default:
			errs = append(errs, redfish.PropertyUnknown(k))
		}
	}
	if len(errs) > 0 {
		return false, redfish.Merge(errs)
	}
	if !set {
		return false, redfish.EmptyJSON()
	}
	return enable, nil
}

// secureBootNeedsUEFI is the 400 for turning Secure Boot on in Legacy mode.
func secureBootNeedsUEFI() *redfish.Error {
	e := redfish.PropertyValueConflict("SecureBootEnable", "Boot/BootSourceOverrideMode")
	e.Messages[0].Message += " UEFI Secure Boot needs the UEFI boot mode, and this system boots with BIOS (Legacy):" +
		" set Boot.BootSourceOverrideMode to UEFI on the ComputerSystem first."
	return e
}

func (s *Server) patchSecureBoot(w http.ResponseWriter, r *http.Request) {
	m, body, ok := s.patchable(w, r, "SecureBoot", func(m kubevirt.Machine) any { return secureBootResource(m) })
	if !ok {
		return
	}
	enable, rerr := decodeSecureBootPatch(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	if enable && kubevirt.FirmwareMode(m.VM) != redfish.BootUEFI {
		writeError(w, secureBootNeedsUEFI())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.backend.SetSettings(ctx, m.VM.Namespace, m.VM.Name, kubevirt.Settings{SecureBoot: &enable})
	s.countAction("SecureBoot", err)
	switch {
	case errors.Is(err, kubevirt.ErrSecureBootNeedsUEFI):
		writeError(w, secureBootNeedsUEFI())
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if m, ok = s.machine(w, r, "SecureBoot"); ok {
		writeJSON(w, http.StatusOK, secureBootResource(m))
	}
}

// --- Bios ---

func biosSettingsURI(id string) string { return biosURI(id) + "/Settings" }

func (s *Server) bios(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.machine(w, r, "Bios"); ok {
		writeJSON(w, http.StatusOK, biosResource(m))
	}
}

func enabled(b bool) string {
	if b {
		return "Enabled"
	}
	return "Disabled"
}

// BIOS attribute names and values. BootMode and SecureBoot are writable through the settings
// object; the others only describe the firmware.
const (
	attrBootMode   = "BootMode"
	attrSecureBoot = "SecureBoot"
	bootModeUefi   = "Uefi"
	bootModeBios   = "Bios"
)

// biosReadOnlyAttrs are the attributes shown but not writable.
var biosReadOnlyAttrs = map[string]bool{"PersistentEfiVariables": true, "SystemManagementMode": true, "MachineType": true}

// biosAttributes renders firmware facts as BIOS attributes.
func biosAttributes(f kubevirt.FirmwareFacts) map[string]any {
	attrs := map[string]any{attrSecureBoot: enabled(f.SecureBoot), attrBootMode: bootModeBios}
	if f.Mode == redfish.BootUEFI {
		attrs[attrBootMode] = bootModeUefi
		attrs["PersistentEfiVariables"] = enabled(*f.PersistentNVRAM)
	}
	if f.SMM != nil {
		attrs["SystemManagementMode"] = enabled(*f.SMM)
	}
	if f.MachineType != "" {
		attrs["MachineType"] = f.MachineType
	}
	return attrs
}

// biosResource describes the firmware the machine runs with (its running VMI, else what its
// VM sets for the next start). Changes go to the settings object and apply at the next
// start, as on a physical BIOS.
func biosResource(m kubevirt.Machine) redfish.Bios {
	return redfish.Bios{
		ODataID: biosURI(m.ID()), ODataType: redfish.TypeBios, Id: "Bios",
		Name:        "BIOS Configuration Current Settings",
		Description: "The firmware of the KubeVirt VirtualMachine as it runs (as its VM sets it while it is off).",
		Attributes:  biosAttributes(kubevirt.CurrentFirmwareOf(m)),
		Settings: &redfish.Settings{
			ODataType:           redfish.TypeSettings,
			SettingsObject:      redfish.Link{ODataID: biosSettingsURI(m.ID())},
			SupportedApplyTimes: []string{"OnReset"},
			Messages:            []redfish.Message{},
		},
	}
}

// biosSettingsResource is the settings object: the firmware the VM spec sets for the next
// start.
func biosSettingsResource(m kubevirt.Machine) redfish.Bios {
	return redfish.Bios{
		ODataID: biosSettingsURI(m.ID()), ODataType: redfish.TypeBios, Id: "Settings",
		Name:        "BIOS Configuration Pending Settings",
		Description: "The firmware the KubeVirt VirtualMachine starts with next. BootMode (Uefi, Bios) and SecureBoot (Enabled, Disabled) are writable; a change applies at the next start.",
		Attributes:  biosAttributes(kubevirt.FirmwareOf(m)),
	}
}

func (s *Server) biosSettings(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.machine(w, r, "Bios"); ok {
		writeJSON(w, http.StatusOK, biosSettingsResource(m))
	}
}

// biosReadOnly are the Bios properties a PATCH of the settings object may not set.
var biosReadOnly = jsonKeys(redfish.Bios{})

// decodeBiosSettingsPatch validates a PATCH of the BIOS settings object. Attributes may set
// BootMode and SecureBoot; @Redfish.SettingsApplyTime may ask for OnReset, the one apply time
// there is. Every problem is reported at once.
func decodeBiosSettingsPatch(body []byte) (mode *redfish.BootMode, secure *bool, rerr *redfish.Error) {
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return nil, nil, rerr
	}
	var errs []*redfish.Error
	changes := 0
	for k, v := range obj {
		switch {
		case k == "@Redfish.SettingsApplyTime":
			errs = append(errs, decodeApplyTime(v)...)
		case isAnnotation(k):
		case k == "Attributes":
			attrs, ok := v.(map[string]any)
			if !ok {
				errs = append(errs, redfish.PropertyValueTypeError(show(v), "Attributes"))
				continue
			}
			for name, val := range attrs {
				path := "Attributes/" + name
				switch {
				case name == attrBootMode:
					m, err := enumValue(val, path, []string{bootModeUefi, bootModeBios})
					if err != nil {
						errs = append(errs, err)
						continue
					}
					bm := redfish.BootLegacy
					if m == bootModeUefi {
						bm = redfish.BootUEFI
					}
					mode, changes = &bm, changes+1
				case name == attrSecureBoot:
					sb, err := enumValue(val, path, []string{"Enabled", "Disabled"})
					if err != nil {
						errs = append(errs, err)
						continue
					}
					on := sb == "Enabled"
					secure, changes = &on, changes+1
				case biosReadOnlyAttrs[name]:
					errs = append(errs, redfish.PropertyNotWritable(path))
				default:
					errs = append(errs, redfish.PropertyUnknown(path))
				}
			}
		case biosReadOnly[k] || k == "Actions":
			errs = append(errs, redfish.PropertyNotWritable(k))
		default:
			errs = append(errs, redfish.PropertyUnknown(k))
		}
	}
	if len(errs) == 0 && mode != nil && secure != nil && *mode == redfish.BootLegacy && *secure {
		errs = append(errs, redfish.PropertyValueConflict("Attributes/SecureBoot", "Attributes/BootMode"))
	}
	if len(errs) > 0 {
		return nil, nil, redfish.Merge(errs)
	}
	if changes == 0 {
		return nil, nil, redfish.EmptyJSON()
	}
	return mode, secure, nil
}

// decodeApplyTime checks @Redfish.SettingsApplyTime: only OnReset can be honoured, since a VM
// picks up firmware changes when it starts.
func decodeApplyTime(v any) []*redfish.Error {
	const path = "@Redfish.SettingsApplyTime"
	obj, ok := v.(map[string]any)
	if !ok {
		return []*redfish.Error{redfish.PropertyValueTypeError(show(v), path)}
	}
	var errs []*redfish.Error
	for k, val := range obj {
		switch {
		case k == "ApplyTime":
			if _, err := enumValue(val, path+"/ApplyTime", []string{"OnReset"}); err != nil {
				errs = append(errs, err)
			}
		case strings.HasPrefix(k, "@odata."):
		default:
			errs = append(errs, redfish.PropertyUnknown(path+"/"+k))
		}
	}
	return errs
}

func (s *Server) patchBiosSettings(w http.ResponseWriter, r *http.Request) {
	m, body, ok := s.patchable(w, r, "Bios", func(m kubevirt.Machine) any { return biosSettingsResource(m) })
	if !ok {
		return
	}
	mode, secure, rerr := decodeBiosSettingsPatch(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	next := kubevirt.FirmwareMode(m.VM)
	if mode != nil {
		next = *mode
	}
	if secure != nil && *secure && next != redfish.BootUEFI {
		writeError(w, biosSecureBootNeedsUEFI())
		return
	}
	settings := kubevirt.Settings{SecureBoot: secure}
	if mode != nil {
		settings.Boot = &kubevirt.BootRequest{Mode: mode}
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.backend.SetSettings(ctx, m.VM.Namespace, m.VM.Name, settings)
	s.countAction("BiosSettings", err)
	switch {
	case errors.Is(err, kubevirt.ErrSecureBootNeedsUEFI):
		writeError(w, biosSecureBootNeedsUEFI())
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if m, ok = s.machine(w, r, "Bios"); ok {
		writeJSON(w, http.StatusOK, biosSettingsResource(m))
	}
}

func biosSecureBootNeedsUEFI() *redfish.Error {
	e := redfish.PropertyValueConflict("Attributes/SecureBoot", "Attributes/BootMode")
	e.Messages[0].Message += " UEFI Secure Boot needs BootMode Uefi, and this system boots with BIOS (Legacy)."
	return e
}

// --- ComputerSystem PATCH: boot override and indicator LED ---

// patchComputerSystem applies a ComputerSystem PATCH: the boot override and the indicator
// LED, validated together and written as one patch.
func (s *Server) patchComputerSystem(w http.ResponseWriter, r *http.Request) {
	m, body, ok := s.patchable(w, r, "ComputerSystem", func(m kubevirt.Machine) any { return systemResource(m) })
	if !ok {
		return
	}
	obj, rerr := decodeObject(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	settings, rerr := decodeSystemSettings(obj)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.backend.SetSettings(ctx, m.VM.Namespace, m.VM.Name, settings)
	if settings.Boot != nil {
		s.countAction("Boot", err)
	}
	if settings.IndicatorLED != nil {
		s.countAction("IndicatorLED", err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if m, ok = s.machine(w, r, "ComputerSystem"); ok {
		writeJSON(w, http.StatusOK, systemResource(m))
	}
}

// decodeSystemSettings validates a ComputerSystem PATCH that sets the indicator: the
// indicator properties here, everything else by decodeSystemPatch, all errors reported at once.
func decodeSystemSettings(obj map[string]any) (kubevirt.Settings, *redfish.Error) {
	var out kubevirt.Settings
	led, errs := decodeIndicator(obj)
	out.IndicatorLED = led
	rest := map[string]any{}
	changes := false
	for k, v := range obj {
		if k != "IndicatorLED" && k != "LocationIndicatorActive" {
			rest[k] = v
			changes = changes || !isAnnotation(k)
		}
	}
	if changes {
		restBody, _ := json.Marshal(rest)
		boot, rerr := decodeSystemPatch(restBody)
		switch {
		case rerr == nil:
			out.Boot = &boot
		case len(rerr.Messages) == 1 && strings.HasSuffix(rerr.Messages[0].MessageID, ".EmptyJSON"):
			// "Boot": {} next to the indicator changes nothing; the request is not empty.
		default:
			errs = append(errs, rerr)
		}
	}
	if len(errs) > 0 {
		return kubevirt.Settings{}, redfish.Merge(errs)
	}
	if out.Boot == nil && out.IndicatorLED == nil {
		return kubevirt.Settings{}, redfish.EmptyJSON()
	}
	return out, nil
}

// decodeIndicator reads IndicatorLED and LocationIndicatorActive. They show one state: true
// is Lit (or Blinking), false is Off, and a body setting both must agree.
func decodeIndicator(obj map[string]any) (*redfish.IndicatorLED, []*redfish.Error) {
	var errs []*redfish.Error
	var led *redfish.IndicatorLED
	if v, ok := obj["IndicatorLED"]; ok {
		l, err := enumValue(v, "IndicatorLED", redfish.IndicatorLEDs)
		if err != nil {
			errs = append(errs, err)
		} else {
			led = &l
		}
	}
	if v, ok := obj["LocationIndicatorActive"]; ok {
		on, isBool := v.(bool)
		switch {
		case !isBool:
			errs = append(errs, redfish.PropertyValueTypeError(show(v), "LocationIndicatorActive"))
		case led == nil:
			l := redfish.LEDOff
			if on {
				l = redfish.LEDLit
			}
			led = &l
		case (*led != redfish.LEDOff) != on:
			errs = append(errs, redfish.PropertyValueConflict("LocationIndicatorActive", "IndicatorLED"))
		}
	}
	return led, errs
}
