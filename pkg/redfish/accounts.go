package redfish

import "net/http"

// Types of the account and session resources.
const (
	TypeAccountService = "#AccountService.v1_15_0.AccountService"
	TypeManagerAccount = "#ManagerAccount.v1_12_0.ManagerAccount"
	TypeAccountColl    = "#ManagerAccountCollection.ManagerAccountCollection"
	TypeRole           = "#Role.v1_3_1.Role"
	TypeRoleColl       = "#RoleCollection.RoleCollection"
	TypeSession        = "#Session.v1_7_0.Session"
)

// URIs of the account service.
const (
	AccountServiceURI = RootURI + "/AccountService"
	AccountsURI       = AccountServiceURI + "/Accounts"
	RolesURI          = AccountServiceURI + "/Roles"
)

// Privileges of the Redfish standard roles (DSP0266 "Roles").
const (
	PrivLogin               = "Login"
	PrivConfigureManager    = "ConfigureManager"
	PrivConfigureUsers      = "ConfigureUsers"
	PrivConfigureComponents = "ConfigureComponents"
	PrivConfigureSelf       = "ConfigureSelf"
)

// AccountService is /redfish/v1/AccountService.
type AccountService struct {
	ODataID                         string `json:"@odata.id"`
	ODataType                       string `json:"@odata.type"`
	Id                              string `json:"Id"`
	Name                            string `json:"Name"`
	Description                     string `json:"Description,omitempty"`
	ServiceEnabled                  bool   `json:"ServiceEnabled"`
	Status                          Status `json:"Status"`
	LocalAccountAuth                string `json:"LocalAccountAuth"`
	HTTPBasicAuth                   string `json:"HTTPBasicAuth"`
	MinPasswordLength               int    `json:"MinPasswordLength"`
	MaxPasswordLength               int    `json:"MaxPasswordLength"`
	AccountLockoutThreshold         int    `json:"AccountLockoutThreshold"`
	AccountLockoutDuration          int    `json:"AccountLockoutDuration"`
	AccountLockoutCounterResetAfter int    `json:"AccountLockoutCounterResetAfter"`
	Accounts                        Link   `json:"Accounts"`
	Roles                           Link   `json:"Roles"`
}

// ManagerAccount is one configured user. The password is never shown: Password is always
// null, as the schema asks.
type ManagerAccount struct {
	ODataID      string              `json:"@odata.id"`
	ODataType    string              `json:"@odata.type"`
	Id           string              `json:"Id"`
	Name         string              `json:"Name"`
	Description  string              `json:"Description,omitempty"`
	UserName     string              `json:"UserName"`
	Password     *string             `json:"Password"`
	RoleId       string              `json:"RoleId"`
	Enabled      bool                `json:"Enabled"`
	Locked       bool                `json:"Locked"`
	AccountTypes []string            `json:"AccountTypes"`
	Links        ManagerAccountLinks `json:"Links"`
}

// ManagerAccountLinks is ManagerAccount.Links.
type ManagerAccountLinks struct {
	Role Link `json:"Role"`
}

// Role is one of the predefined roles.
type Role struct {
	ODataID            string   `json:"@odata.id"`
	ODataType          string   `json:"@odata.type"`
	Id                 string   `json:"Id"`
	Name               string   `json:"Name"`
	Description        string   `json:"Description,omitempty"`
	RoleId             string   `json:"RoleId"`
	IsPredefined       bool     `json:"IsPredefined"`
	AssignedPrivileges []string `json:"AssignedPrivileges"`
	OemPrivileges      []string `json:"OemPrivileges"`
}

// Session is one login session. Password is always null.
type Session struct {
	ODataID               string  `json:"@odata.id"`
	ODataType             string  `json:"@odata.type"`
	Id                    string  `json:"Id"`
	Name                  string  `json:"Name"`
	Description           string  `json:"Description,omitempty"`
	UserName              string  `json:"UserName"`
	Password              *string `json:"Password"`
	SessionType           string  `json:"SessionType"`
	CreatedTime           string  `json:"CreatedTime"`
	ClientOriginIPAddress string  `json:"ClientOriginIPAddress,omitempty"`
}

// PropertyMissing: a required property of a create request is absent.
func PropertyMissing(path string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyMissing", "The property %1 is a required property and must be included in the request.", "Warning",
		"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed."}, []string{lastSegment(path)}, Pointer(path))
}

// SessionLimitExceeded: the user holds as many sessions as allowed (503).
func SessionLimitExceeded() *Error {
	return newErr(http.StatusServiceUnavailable, msgDef{"SessionLimitExceeded", "The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.", "Critical",
		"Reduce the number of other sessions before trying to establish the session or increase the limit of simultaneous sessions (if supported)."}, nil)
}

// OperationNotAllowedBecause is OperationNotAllowed (405) with the reason appended, such as
// "the configuration owns the accounts".
func OperationNotAllowedBecause(reason string) *Error {
	e := OperationNotAllowed()
	if reason != "" {
		e.Messages[0].Message += " " + reason
		e.Messages[0].Resolution = reason
	}
	return e
}

// Redacted stands in for a secret value in error messages.
const Redacted = "(redacted)"
