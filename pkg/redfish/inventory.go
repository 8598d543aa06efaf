package redfish

// Types of the inventory resources below a ComputerSystem. They name types present in
// DSP8010 2025.4 (the latest minor release of each schema).
const (
	TypeProcessor             = "#Processor.v1_22_0.Processor"
	TypeProcessorColl         = "#ProcessorCollection.ProcessorCollection"
	TypeEthernetInterface     = "#EthernetInterface.v1_12_0.EthernetInterface"
	TypeEthernetInterfaceColl = "#EthernetInterfaceCollection.EthernetInterfaceCollection"
	TypeSimpleStorage         = "#SimpleStorage.v1_3_0.SimpleStorage"
	TypeSimpleStorageColl     = "#SimpleStorageCollection.SimpleStorageCollection"
	TypeStorage               = "#Storage.v1_21_0.Storage"
	TypeStorageColl           = "#StorageCollection.StorageCollection"
	TypeStorageController     = "#StorageController.v1_11_0.StorageController"
	TypeStorageControllerColl = "#StorageControllerCollection.StorageControllerCollection"
	TypeDrive                 = "#Drive.v1_22_0.Drive"
	TypeVolume                = "#Volume.v1_10_0.Volume"
	TypeVolumeColl            = "#VolumeCollection.VolumeCollection"
	TypeSecureBoot            = "#SecureBoot.v1_1_0.SecureBoot"
	TypeBios                  = "#Bios.v1_2_0.Bios"
	// TypeOperationApplyTimeSupport types the @Redfish.OperationApplyTimeSupport annotation.
	TypeOperationApplyTimeSupport = "#Settings.v1_4_0.OperationApplyTimeSupport"
)

// IndicatorLED is ComputerSystem.IndicatorLED.
type IndicatorLED string

// Indicator states. The LED of a virtual machine is a stored setting: nothing lights up, but
// what is set reads back.
const (
	LEDLit      IndicatorLED = "Lit"
	LEDBlinking IndicatorLED = "Blinking"
	LEDOff      IndicatorLED = "Off"
)

// IndicatorLEDs lists the accepted indicator states.
var IndicatorLEDs = []IndicatorLED{LEDLit, LEDBlinking, LEDOff}

// Processor is one socket of the virtual machine.
type Processor struct {
	ODataID               string `json:"@odata.id"`
	ODataType             string `json:"@odata.type"`
	Id                    string `json:"Id"`
	Name                  string `json:"Name"`
	Description           string `json:"Description,omitempty"`
	Socket                string `json:"Socket"`
	ProcessorType         string `json:"ProcessorType"`
	ProcessorArchitecture string `json:"ProcessorArchitecture,omitempty"`
	InstructionSet        string `json:"InstructionSet,omitempty"`
	Model                 string `json:"Model,omitempty"`
	TotalCores            int    `json:"TotalCores"`
	TotalEnabledCores     int    `json:"TotalEnabledCores"`
	TotalThreads          int    `json:"TotalThreads"`
	Status                Status `json:"Status"`
}

// IPv4Address is IPAddresses.IPv4Address.
type IPv4Address struct {
	Address string `json:"Address"`
}

// IPv6Address is IPAddresses.IPv6Address.
type IPv6Address struct {
	Address      string `json:"Address"`
	PrefixLength *int   `json:"PrefixLength,omitempty"`
}

// EthernetInterface is one network interface of the virtual machine.
type EthernetInterface struct {
	ODataID             string          `json:"@odata.id"`
	ODataType           string          `json:"@odata.type"`
	Id                  string          `json:"Id"`
	Name                string          `json:"Name"`
	Description         string          `json:"Description,omitempty"`
	MACAddress          string          `json:"MACAddress,omitempty"`
	PermanentMACAddress string          `json:"PermanentMACAddress,omitempty"`
	InterfaceEnabled    bool            `json:"InterfaceEnabled"`
	LinkStatus          string          `json:"LinkStatus,omitempty"`
	IPv4Addresses       []IPv4Address   `json:"IPv4Addresses"`
	IPv6Addresses       []IPv6Address   `json:"IPv6Addresses"`
	Status              Status          `json:"Status"`
	Links               ChassisLinkOnly `json:"Links"`
}

// SimpleStorage is the virtual machine's disks as one simple controller.
type SimpleStorage struct {
	ODataID     string          `json:"@odata.id"`
	ODataType   string          `json:"@odata.type"`
	Id          string          `json:"Id"`
	Name        string          `json:"Name"`
	Description string          `json:"Description,omitempty"`
	Devices     []SimpleDevice  `json:"Devices"`
	Status      Status          `json:"Status"`
	Links       ChassisLinkOnly `json:"Links"`
}

// SimpleDevice is SimpleStorage.Device.
type SimpleDevice struct {
	Name          string `json:"Name"`
	CapacityBytes *int64 `json:"CapacityBytes,omitempty"`
	Status        Status `json:"Status"`
}

// ChassisLinkOnly is a Links object that names the chassis holding the resource.
type ChassisLinkOnly struct {
	Chassis Link `json:"Chassis"`
}

// StorageLinks is Storage.Links.
type StorageLinks struct {
	Enclosures []Link `json:"Enclosures"`
}

// Storage is the storage subsystem of the virtual machine.
type Storage struct {
	ODataID     string       `json:"@odata.id"`
	ODataType   string       `json:"@odata.type"`
	Id          string       `json:"Id"`
	Name        string       `json:"Name"`
	Description string       `json:"Description,omitempty"`
	Drives      []Link       `json:"Drives"`
	DrivesCount int          `json:"Drives@odata.count"`
	Controllers Link         `json:"Controllers"`
	Volumes     Link         `json:"Volumes"`
	Status      Status       `json:"Status"`
	Links       StorageLinks `json:"Links"`
}

// StorageController is one disk bus of the virtual machine.
type StorageController struct {
	ODataID                  string   `json:"@odata.id"`
	ODataType                string   `json:"@odata.type"`
	Id                       string   `json:"Id"`
	Name                     string   `json:"Name"`
	Description              string   `json:"Description,omitempty"`
	SupportedDeviceProtocols []string `json:"SupportedDeviceProtocols,omitempty"`
	SupportedRAIDTypes       []string `json:"SupportedRAIDTypes"`
	Status                   Status   `json:"Status"`
}

// Drive is one disk of the virtual machine. MediaType and Protocol are null when the
// virtual device matches none of their values.
type Drive struct {
	ODataID       string     `json:"@odata.id"`
	ODataType     string     `json:"@odata.type"`
	Id            string     `json:"Id"`
	Name          string     `json:"Name"`
	Description   string     `json:"Description,omitempty"`
	CapacityBytes *int64     `json:"CapacityBytes,omitempty"`
	MediaType     *string    `json:"MediaType"`
	Protocol      *string    `json:"Protocol"`
	Status        Status     `json:"Status"`
	Links         DriveLinks `json:"Links"`
}

// DriveLinks is Drive.Links.
type DriveLinks struct {
	Volumes []Link `json:"Volumes"`
	Chassis Link   `json:"Chassis"`
}

// Volume is the persistent volume behind a drive.
type Volume struct {
	ODataID       string      `json:"@odata.id"`
	ODataType     string      `json:"@odata.type"`
	Id            string      `json:"Id"`
	Name          string      `json:"Name"`
	Description   string      `json:"Description,omitempty"`
	CapacityBytes int64       `json:"CapacityBytes"`
	Status        Status      `json:"Status"`
	Links         VolumeLinks `json:"Links"`
}

// VolumeLinks is Volume.Links.
type VolumeLinks struct {
	Drives []Link `json:"Drives"`
}

// VolumeCollection is a collection of volumes, with the annotation that says which apply
// times a create or delete may ask for: none, as volumes are not created through Redfish.
type VolumeCollection struct {
	Collection
	ApplyTimes OperationApplyTimeSupport `json:"@Redfish.OperationApplyTimeSupport"`
}

// OperationApplyTimeSupport is the Redfish.OperationApplyTimeSupport annotation.
type OperationApplyTimeSupport struct {
	ODataType       string   `json:"@odata.type"`
	SupportedValues []string `json:"SupportedValues"`
}

// SecureBoot is the UEFI Secure Boot state of the virtual machine.
type SecureBoot struct {
	ODataID               string   `json:"@odata.id"`
	ODataType             string   `json:"@odata.type"`
	Id                    string   `json:"Id"`
	Name                  string   `json:"Name"`
	Description           string   `json:"Description,omitempty"`
	SecureBootEnable      bool     `json:"SecureBootEnable"`
	SecureBootCurrentBoot string   `json:"SecureBootCurrentBoot,omitempty"`
	SecureBootMode        string   `json:"SecureBootMode,omitempty"`
	WriteableProperties   []string `json:"@Redfish.WriteableProperties"`
}

// Bios describes the firmware of the virtual machine. Settings names its settings object
// (itself a Bios), where the writable attributes are changed for the next start.
type Bios struct {
	ODataID     string         `json:"@odata.id"`
	ODataType   string         `json:"@odata.type"`
	Id          string         `json:"Id"`
	Name        string         `json:"Name"`
	Description string         `json:"Description,omitempty"`
	Attributes  map[string]any `json:"Attributes"`
	Settings    *Settings      `json:"@Redfish.Settings,omitempty"`
}

// TypeSettings types the @Redfish.Settings annotation.
const TypeSettings = "#Settings.v1_4_0.Settings"

// Settings is the @Redfish.Settings annotation of a resource with a settings object.
type Settings struct {
	ODataType           string    `json:"@odata.type"`
	SettingsObject      Link      `json:"SettingsObject"`
	SupportedApplyTimes []string  `json:"SupportedApplyTimes"`
	Messages            []Message `json:"Messages"`
}
