package redfish

// Condition is one entry of Status.Conditions: a problem of the resource, in words.
type Condition struct {
	MessageID string `json:"MessageId"`
	Message   string `json:"Message"`
	Severity  string `json:"Severity"`
}

// ResourceEventRegistry names the DMTF Resource Event messages our conditions use.
const ResourceEventRegistry = "ResourceEvent.1.3.0"

// Warning is a condition of severity Warning.
func Warning(msg string) Condition {
	return Condition{MessageID: ResourceEventRegistry + ".ResourceStatusChangedWarning", Message: msg, Severity: "Warning"}
}

// Critical is a condition of severity Critical.
func Critical(msg string) Condition {
	return Condition{MessageID: ResourceEventRegistry + ".ResourceStatusChangedCritical", Message: msg, Severity: "Critical"}
}
