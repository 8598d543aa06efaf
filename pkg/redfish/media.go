package redfish

// Types of the virtual media and task resources.
const (
	TypeVirtualMedia     = "#VirtualMedia.v1_6_0.VirtualMedia"
	TypeVirtualMediaColl = "#VirtualMediaCollection.VirtualMediaCollection"
	TypeTaskService      = "#TaskService.v1_2_0.TaskService"
	TypeTask             = "#Task.v1_7_0.Task"
	TypeTaskColl         = "#TaskCollection.TaskCollection"
	TypeActionInfo       = "#ActionInfo.v1_4_2.ActionInfo"
	TaskServiceURI       = RootURI + "/TaskService"
	TasksURI             = TaskServiceURI + "/Tasks"
)

// VirtualMedia is one virtual drive.
type VirtualMedia struct {
	ODataID              string              `json:"@odata.id"`
	ODataType            string              `json:"@odata.type"`
	Id                   string              `json:"Id"`
	Name                 string              `json:"Name"`
	Description          string              `json:"Description,omitempty"`
	MediaTypes           []string            `json:"MediaTypes"`
	Image                *string             `json:"Image"`
	ImageName            *string             `json:"ImageName"`
	Inserted             bool                `json:"Inserted"`
	WriteProtected       bool                `json:"WriteProtected"`
	ConnectedVia         string              `json:"ConnectedVia"`
	TransferProtocolType *string             `json:"TransferProtocolType"`
	TransferMethod       *string             `json:"TransferMethod"`
	Status               Status              `json:"Status"`
	Actions              VirtualMediaActions `json:"Actions"`
}

// VirtualMediaActions are the drive's actions.
type VirtualMediaActions struct {
	Insert InsertMediaAction `json:"#VirtualMedia.InsertMedia"`
	Eject  ActionTarget      `json:"#VirtualMedia.EjectMedia"`
}

// InsertMediaAction advertises the accepted transfer protocols, and links the ActionInfo
// that describes every parameter.
type InsertMediaAction struct {
	Target          string   `json:"target"`
	ActionInfo      string   `json:"@Redfish.ActionInfo,omitempty"`
	ProtocolAllowed []string `json:"TransferProtocolType@Redfish.AllowableValues"`
}

// ActionInfo describes the parameters of an action.
type ActionInfo struct {
	ODataID    string            `json:"@odata.id"`
	ODataType  string            `json:"@odata.type"`
	Id         string            `json:"Id"`
	Name       string            `json:"Name"`
	Parameters []ActionParameter `json:"Parameters"`
}

// ActionParameter is one parameter of an ActionInfo. DataType is Boolean, Number, String...;
// AllowableValues are strings whatever the type ("true" for a Boolean).
type ActionParameter struct {
	Name            string   `json:"Name"`
	Required        bool     `json:"Required"`
	DataType        string   `json:"DataType"`
	AllowableValues []string `json:"AllowableValues,omitempty"`
}

// ActionTarget is an action with nothing to advertise but its target.
type ActionTarget struct {
	Target string `json:"target"`
}

// TaskService is /redfish/v1/TaskService.
type TaskService struct {
	ODataID                         string `json:"@odata.id"`
	ODataType                       string `json:"@odata.type"`
	Id                              string `json:"Id"`
	Name                            string `json:"Name"`
	ServiceEnabled                  bool   `json:"ServiceEnabled"`
	CompletedTaskOverWritePolicy    string `json:"CompletedTaskOverWritePolicy"`
	LifeCycleEventOnTaskStateChange bool   `json:"LifeCycleEventOnTaskStateChange"`
	Status                          Status `json:"Status"`
	Tasks                           Link   `json:"Tasks"`
}

// Task is a long-running operation: an image import.
type Task struct {
	ODataID         string    `json:"@odata.id"`
	ODataType       string    `json:"@odata.type"`
	Id              string    `json:"Id"`
	Name            string    `json:"Name"`
	TaskState       string    `json:"TaskState"`
	TaskStatus      string    `json:"TaskStatus"`
	PercentComplete int       `json:"PercentComplete"`
	StartTime       string    `json:"StartTime,omitempty"`
	EndTime         string    `json:"EndTime,omitempty"`
	Messages        []Message `json:"Messages"`
}
