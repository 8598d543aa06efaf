package redfish

// Resource type versions served. They name types present in DSP8010 2025.4.
const (
	TypeServiceRoot     = "#ServiceRoot.v1_17_0.ServiceRoot"
	TypeComputerSystem  = "#ComputerSystem.v1_22_0.ComputerSystem"
	TypeManager         = "#Manager.v1_19_0.Manager"
	TypeChassis         = "#Chassis.v1_25_0.Chassis"
	TypeSessionService  = "#SessionService.v1_1_9.SessionService"
	TypeSystemColl      = "#ComputerSystemCollection.ComputerSystemCollection"
	TypeManagerColl     = "#ManagerCollection.ManagerCollection"
	TypeChassisColl     = "#ChassisCollection.ChassisCollection"
	TypeSessionColl     = "#SessionCollection.SessionCollection"
	ODataContextService = "/redfish/v1/$metadata"
)

// Redfish URIs of the resources we serve.
const (
	RootURI           = "/redfish/v1"
	SystemsURI        = RootURI + "/Systems"
	ManagersURI       = RootURI + "/Managers"
	ChassisURI        = RootURI + "/Chassis"
	SessionServiceURI = RootURI + "/SessionService"
	SessionsURI       = SessionServiceURI + "/Sessions"
)

// Link is a navigation property.
type Link struct {
	ODataID string `json:"@odata.id"`
}

// Links turns URIs into navigation properties; never nil, so it renders as [].
func Links(uris ...string) []Link {
	out := make([]Link, 0, len(uris))
	for _, u := range uris {
		out = append(out, Link{u})
	}
	return out
}

// Status is the common Resource.Status.
type Status struct {
	State        string      `json:"State"`
	Health       string      `json:"Health"`
	HealthRollup string      `json:"HealthRollup,omitempty"`
	Conditions   []Condition `json:"Conditions,omitempty"`
}

// Collection is any resource collection.
type Collection struct {
	ODataID      string `json:"@odata.id"`
	ODataType    string `json:"@odata.type"`
	Name         string `json:"Name"`
	Description  string `json:"Description,omitempty"`
	MembersCount int    `json:"Members@odata.count"`
	Members      []Link `json:"Members"`
}

// NewCollection builds a collection whose members are the given URIs.
func NewCollection(id, typ, name string, members []string) Collection {
	return Collection{ODataID: id, ODataType: typ, Name: name, MembersCount: len(members), Members: Links(members...)}
}

// ServiceRoot is /redfish/v1.
type ServiceRoot struct {
	ODataID          string           `json:"@odata.id"`
	ODataType        string           `json:"@odata.type"`
	Id               string           `json:"Id"`
	Name             string           `json:"Name"`
	RedfishVersion   string           `json:"RedfishVersion"`
	UUID             string           `json:"UUID"`
	Vendor           string           `json:"Vendor"`
	Product          string           `json:"Product"`
	Systems          Link             `json:"Systems"`
	Managers         Link             `json:"Managers"`
	Chassis          Link             `json:"Chassis"`
	SessionService   Link             `json:"SessionService"`
	AccountService   Link             `json:"AccountService"`
	Tasks            Link             `json:"Tasks"`
	Links            ServiceRootLinks `json:"Links"`
	ProtocolFeatures ProtocolFeatures `json:"ProtocolFeaturesSupported"`
}

// ServiceRootLinks is ServiceRoot.Links.
type ServiceRootLinks struct {
	Sessions Link `json:"Sessions"`
}

// ProtocolFeatures tells clients which optional protocol features we implement.
type ProtocolFeatures struct {
	ExcerptQuery    bool           `json:"ExcerptQuery"`
	OnlyMemberQuery bool           `json:"OnlyMemberQuery"`
	FilterQuery     bool           `json:"FilterQuery"`
	SelectQuery     bool           `json:"SelectQuery"`
	TopSkipQuery    bool           `json:"TopSkipQuery"`
	ExpandQuery     ExpandFeatures `json:"ExpandQuery"`
}

// ExpandFeatures is ProtocolFeaturesSupported.ExpandQuery.
type ExpandFeatures struct {
	ExpandAll bool `json:"ExpandAll"`
	Levels    bool `json:"Levels"`
	Links     bool `json:"Links"`
	NoLinks   bool `json:"NoLinks"`
	MaxLevels int  `json:"MaxLevels,omitempty"`
}

// ComputerSystem is one VM.
type ComputerSystem struct {
	ODataID          string           `json:"@odata.id"`
	ODataType        string           `json:"@odata.type"`
	Id               string           `json:"Id"`
	Name             string           `json:"Name"`
	Description      string           `json:"Description,omitempty"`
	SystemType       string           `json:"SystemType"`
	Manufacturer     string           `json:"Manufacturer"`
	Model            string           `json:"Model"`
	SerialNumber     string           `json:"SerialNumber,omitempty"`
	UUID             string           `json:"UUID,omitempty"`
	HostName         string           `json:"HostName,omitempty"`
	PowerState       PowerState       `json:"PowerState"`
	Status           Status           `json:"Status"`
	ProcessorSummary ProcessorSummary `json:"ProcessorSummary"`
	MemorySummary    MemorySummary    `json:"MemorySummary"`
	Boot             Boot             `json:"Boot"`
	VirtualMedia     Link             `json:"VirtualMedia"`
	Links            SystemLinks      `json:"Links"`
	Actions          SystemActions    `json:"Actions"`

	// Inventory (pkg/server/inventory.go). IndicatorLED (deprecated by
	// LocationIndicatorActive, still read by sushy) and LocationIndicatorActive show one
	// stored state.
	BiosVersion             string         `json:"BiosVersion,omitempty"`
	IndicatorLED            IndicatorLED   `json:"IndicatorLED"`
	IndicatorLEDAllowed     []IndicatorLED `json:"IndicatorLED@Redfish.AllowableValues"`
	LocationIndicatorActive bool           `json:"LocationIndicatorActive"`
	WriteableProperties     []string       `json:"@Redfish.WriteableProperties,omitempty"`
	Processors              Link           `json:"Processors"`
	EthernetInterfaces      Link           `json:"EthernetInterfaces"`
	SimpleStorage           Link           `json:"SimpleStorage"`
	Storage                 Link           `json:"Storage"`
	SecureBoot              Link           `json:"SecureBoot"`
	Bios                    Link           `json:"Bios"`
}

// ProcessorSummary is ComputerSystem.ProcessorSummary.
type ProcessorSummary struct {
	Count                 int    `json:"Count"`
	CoreCount             int    `json:"CoreCount,omitempty"`
	LogicalProcessorCount int    `json:"LogicalProcessorCount,omitempty"`
	Model                 string `json:"Model,omitempty"`
	Status                Status `json:"Status"`
}

// MemorySummary is ComputerSystem.MemorySummary.
type MemorySummary struct {
	TotalSystemMemoryGiB float64 `json:"TotalSystemMemoryGiB"`
	Status               Status  `json:"Status"`
}

// Boot is ComputerSystem.Boot.
type Boot struct {
	BootSourceOverrideTarget         BootTarget    `json:"BootSourceOverrideTarget"`
	BootSourceOverrideTargetAllowed  []BootTarget  `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
	BootSourceOverrideEnabled        BootEnabled   `json:"BootSourceOverrideEnabled"`
	BootSourceOverrideEnabledAllowed []BootEnabled `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
	BootSourceOverrideMode           BootMode      `json:"BootSourceOverrideMode"`
	BootSourceOverrideModeAllowed    []BootMode    `json:"BootSourceOverrideMode@Redfish.AllowableValues"`
	WriteableProperties              []string      `json:"@Redfish.WriteableProperties,omitempty"`
}

// SystemLinks is ComputerSystem.Links.
type SystemLinks struct {
	ManagedBy []Link `json:"ManagedBy"`
	Chassis   []Link `json:"Chassis"`
}

// SystemActions is ComputerSystem.Actions.
type SystemActions struct {
	Reset ResetAction `json:"#ComputerSystem.Reset"`
}

// ResetAction advertises the reset types a system accepts.
type ResetAction struct {
	Target           string      `json:"target"`
	ResetTypeAllowed []ResetType `json:"ResetType@Redfish.AllowableValues"`
}

// Manager is the "BMC" of one VM.
type Manager struct {
	ODataID         string       `json:"@odata.id"`
	ODataType       string       `json:"@odata.type"`
	Id              string       `json:"Id"`
	Name            string       `json:"Name"`
	Description     string       `json:"Description,omitempty"`
	ManagerType     string       `json:"ManagerType"`
	Manufacturer    string       `json:"Manufacturer"`
	Model           string       `json:"Model"`
	FirmwareVersion string       `json:"FirmwareVersion"`
	UUID            string       `json:"UUID,omitempty"`
	PowerState      PowerState   `json:"PowerState"`
	Status          Status       `json:"Status"`
	VirtualMedia    Link         `json:"VirtualMedia"`
	Links           ManagerLinks `json:"Links"`
}

// ManagerLinks is Manager.Links.
type ManagerLinks struct {
	ManagerForServers []Link `json:"ManagerForServers"`
	ManagerForChassis []Link `json:"ManagerForChassis"`
	ManagerInChassis  Link   `json:"ManagerInChassis"`
}

// Chassis is the virtual enclosure of one VM.
type Chassis struct {
	ODataID      string       `json:"@odata.id"`
	ODataType    string       `json:"@odata.type"`
	Id           string       `json:"Id"`
	Name         string       `json:"Name"`
	ChassisType  string       `json:"ChassisType"`
	Manufacturer string       `json:"Manufacturer"`
	Model        string       `json:"Model"`
	SerialNumber string       `json:"SerialNumber,omitempty"`
	UUID         string       `json:"UUID,omitempty"` // the VM's firmware UUID, as on its System; none on a node's
	PowerState   PowerState   `json:"PowerState"`
	Status       Status       `json:"Status"`
	Links        ChassisLinks `json:"Links"`
}

// ChassisLinks is Chassis.Links.
type ChassisLinks struct {
	ComputerSystems []Link `json:"ComputerSystems,omitempty"`
	ManagedBy       []Link `json:"ManagedBy,omitempty"`
	// ContainedBy is the hosting node a VM runs on; Contains, on a node, the VMs it hosts.
	ContainedBy *Link  `json:"ContainedBy,omitempty"`
	Contains    []Link `json:"Contains,omitempty"`
}

// SessionService is /redfish/v1/SessionService.
type SessionService struct {
	ODataID        string `json:"@odata.id"`
	ODataType      string `json:"@odata.type"`
	Id             string `json:"Id"`
	Name           string `json:"Name"`
	ServiceEnabled bool   `json:"ServiceEnabled"`
	SessionTimeout int    `json:"SessionTimeout"`
	Status         Status `json:"Status"`
	Sessions       Link   `json:"Sessions"`
}
