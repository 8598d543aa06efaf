package server

import (
	"net/http"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// accountsRefusal explains the 405 of every change to accounts, roles and the AccountService:
// the configuration owns them.
const accountsRefusal = "Accounts and roles are defined by the kubevirt-redfish configuration (users:, with passwords from files or Secrets) and cannot be changed through Redfish."

// maxPasswordLength is bcrypt's limit.
const maxPasswordLength = 72

// roles are the Redfish standard roles with their privileges (DSP0266, "Roles").
var roles = []redfish.Role{
	{Id: config.RoleAdministrator, Name: "Administrator", Description: "Reads and changes everything its allowlist reaches, and reads the accounts within it.",
		AssignedPrivileges: []string{redfish.PrivLogin, redfish.PrivConfigureManager, redfish.PrivConfigureUsers, redfish.PrivConfigureComponents, redfish.PrivConfigureSelf}},
	{Id: config.RoleOperator, Name: "Operator", Description: "Reads, powers, sets boot overrides and inserts virtual media on the systems its allowlist reaches.",
		AssignedPrivileges: []string{redfish.PrivLogin, redfish.PrivConfigureComponents, redfish.PrivConfigureSelf}},
	{Id: config.RoleReadOnly, Name: "ReadOnly", Description: "Reads the systems its allowlist reaches.",
		AssignedPrivileges: []string{redfish.PrivLogin, redfish.PrivConfigureSelf}},
}

func roleURI(id string) string    { return redfish.RolesURI + "/" + id }
func accountURI(id string) string { return redfish.AccountsURI + "/" + id }

func roleResource(r redfish.Role) redfish.Role {
	r.ODataID, r.ODataType, r.RoleId, r.IsPredefined, r.OemPrivileges = roleURI(r.Id), redfish.TypeRole, r.Id, true, []string{}
	return r
}

func (s *Server) accountService(w http.ResponseWriter, r *http.Request) {
	lk := s.cfg.Load().Lockout
	writeJSON(w, http.StatusOK, redfish.AccountService{
		ODataID:        redfish.AccountServiceURI,
		ODataType:      redfish.TypeAccountService,
		Id:             "AccountService",
		Name:           "Account Service",
		Description:    "Accounts come from the kubevirt-redfish configuration and are read-only here.",
		ServiceEnabled: true,
		Status:         redfish.Status{State: "Enabled", Health: "OK"},
		// Only the configured local accounts authenticate.
		LocalAccountAuth:                "Enabled",
		HTTPBasicAuth:                   "Enabled",
		MinPasswordLength:               1,
		MaxPasswordLength:               maxPasswordLength,
		AccountLockoutThreshold:         lk.Threshold,
		AccountLockoutDuration:          int(lk.Duration / time.Second),
		AccountLockoutCounterResetAfter: int(lk.Window / time.Second),
		Accounts:                        redfish.Link{ODataID: redfish.AccountsURI},
		Roles:                           redfish.Link{ODataID: redfish.RolesURI},
	})
}

// mayReadAccount says whether caller may see account u: its own always; others only as an
// Administrator whose allowlist reaches everything u's reaches, so that no tenant learns of
// another tenant's accounts.
func mayReadAccount(caller, u *config.User) bool {
	if caller.Username == u.Username {
		return true
	}
	if caller.Role != config.RoleAdministrator {
		return false
	}
	mine := map[*config.Entry]bool{}
	for _, e := range caller.Entries {
		mine[e] = true
	}
	for _, e := range u.Entries {
		if !mine[e] {
			return false
		}
	}
	return true
}

// visibleAccounts lists the accounts the caller may see, by name.
func (s *Server) visibleAccounts(r *http.Request) []*config.User {
	caller := userOf(r.Context())
	var out []*config.User
	for _, u := range s.cfg.Load().Users {
		if mayReadAccount(caller, u) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

func (s *Server) accounts(w http.ResponseWriter, r *http.Request) {
	var uris []string
	for _, u := range s.visibleAccounts(r) {
		uris = append(uris, accountURI(u.Username))
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(redfish.AccountsURI, redfish.TypeAccountColl, "Accounts Collection", uris))
}

func (s *Server) account(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "account")
	u := s.cfg.Load().Users[id]
	if u == nil || !mayReadAccount(userOf(r.Context()), u) {
		writeError(w, redfish.ResourceNotFound("ManagerAccount", id))
		return
	}
	writeJSON(w, http.StatusOK, redfish.ManagerAccount{
		ODataID:      accountURI(u.Username),
		ODataType:    redfish.TypeManagerAccount,
		Id:           u.Username,
		Name:         "User Account",
		Description:  "Defined in the kubevirt-redfish configuration.",
		UserName:     u.Username,
		Password:     nil,
		RoleId:       u.Role,
		Enabled:      u.Hash != nil,
		Locked:       s.sec.lock.userLocked(u.Username),
		AccountTypes: []string{"Redfish"},
		Links:        redfish.ManagerAccountLinks{Role: redfish.Link{ODataID: roleURI(u.Role)}},
	})
}

func (s *Server) roles(w http.ResponseWriter, r *http.Request) {
	uris := make([]string, len(roles))
	for i, ro := range roles {
		uris[i] = roleURI(ro.Id)
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(redfish.RolesURI, redfish.TypeRoleColl, "Roles Collection", uris))
}

func (s *Server) role(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "role")
	for _, ro := range roles {
		if ro.Id == id {
			writeJSON(w, http.StatusOK, roleResource(ro))
			return
		}
	}
	writeError(w, redfish.ResourceNotFound("Role", id))
}
