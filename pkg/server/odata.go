package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// schemaRefs are the DMTF schema files (and namespaces) of every type we serve, for $metadata.
var schemaRefs = []struct{ file, ns string }{
	{"ServiceRoot_v1.xml", strings.Split(redfish.TypeServiceRoot, ".")[1]},
	{"ComputerSystemCollection_v1.xml", ""},
	{"ComputerSystem_v1.xml", strings.Split(redfish.TypeComputerSystem, ".")[1]},
	{"ManagerCollection_v1.xml", ""},
	{"Manager_v1.xml", strings.Split(redfish.TypeManager, ".")[1]},
	{"ChassisCollection_v1.xml", ""},
	{"Chassis_v1.xml", strings.Split(redfish.TypeChassis, ".")[1]},
	{"SessionService_v1.xml", strings.Split(redfish.TypeSessionService, ".")[1]},
	{"SessionCollection_v1.xml", ""},
	{"Session_v1.xml", strings.Split(redfish.TypeSession, ".")[1]},
	{"AccountService_v1.xml", strings.Split(redfish.TypeAccountService, ".")[1]},
	{"ManagerAccountCollection_v1.xml", ""},
	{"ManagerAccount_v1.xml", strings.Split(redfish.TypeManagerAccount, ".")[1]},
	{"RoleCollection_v1.xml", ""},
	{"Role_v1.xml", strings.Split(redfish.TypeRole, ".")[1]},
	{"VirtualMediaCollection_v1.xml", ""},
	{"VirtualMedia_v1.xml", strings.Split(redfish.TypeVirtualMedia, ".")[1]},
	{"ProcessorCollection_v1.xml", ""},
	{"Processor_v1.xml", strings.Split(redfish.TypeProcessor, ".")[1]},
	{"EthernetInterfaceCollection_v1.xml", ""},
	{"EthernetInterface_v1.xml", strings.Split(redfish.TypeEthernetInterface, ".")[1]},
	{"SimpleStorageCollection_v1.xml", ""},
	{"SimpleStorage_v1.xml", strings.Split(redfish.TypeSimpleStorage, ".")[1]},
	{"StorageCollection_v1.xml", ""},
	{"Storage_v1.xml", strings.Split(redfish.TypeStorage, ".")[1]},
	{"StorageControllerCollection_v1.xml", ""},
	{"StorageController_v1.xml", strings.Split(redfish.TypeStorageController, ".")[1]},
	{"Drive_v1.xml", strings.Split(redfish.TypeDrive, ".")[1]},
	{"VolumeCollection_v1.xml", ""},
	{"Volume_v1.xml", strings.Split(redfish.TypeVolume, ".")[1]},
	{"SecureBoot_v1.xml", strings.Split(redfish.TypeSecureBoot, ".")[1]},
	{"Bios_v1.xml", strings.Split(redfish.TypeBios, ".")[1]},
	{"Settings_v1.xml", strings.Split(redfish.TypeOperationApplyTimeSupport, ".")[1]},
	{"TaskService_v1.xml", strings.Split(redfish.TypeTaskService, ".")[1]},
	{"TaskCollection_v1.xml", ""},
	{"Task_v1.xml", strings.Split(redfish.TypeTask, ".")[1]},
	{"ActionInfo_v1.xml", strings.Split(redfish.TypeActionInfo, ".")[1]},
	{"Message_v1.xml", "v1_1_2"},
	{"Resource_v1.xml", ""},
}

var metadataDoc = func() []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">` + "\n")
	for _, ref := range schemaRefs {
		base := strings.TrimSuffix(ref.file, "_v1.xml")
		b.WriteString(`  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/` + ref.file + `">` + "\n")
		b.WriteString(`    <edmx:Include Namespace="` + base + `"/>` + "\n")
		if ref.ns != "" {
			b.WriteString(`    <edmx:Include Namespace="` + base + "." + ref.ns + `"/>` + "\n")
		}
		b.WriteString("  </edmx:Reference>\n")
	}
	b.WriteString(`  <edmx:DataServices>
    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">
      <EntityContainer Name="Service" Extends="ServiceRoot.` + strings.Split(redfish.TypeServiceRoot, ".")[1] + `.ServiceContainer"/>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
`)
	return []byte(b.String())
}()

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	setCommonHeaders(w.Header())
	w.Header().Set("Content-Type", "application/xml")
	_, _ = w.Write(metadataDoc)
}

// odataService is the OData service document: the top-level resources.
func (s *Server) odataService(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
		URL  string `json:"url"`
	}
	writeJSON(w, http.StatusOK, struct {
		Context string  `json:"@odata.context"`
		Value   []entry `json:"value"`
	}{redfish.ODataContextService, []entry{
		{"Service", "Singleton", "/redfish/v1/"},
		{"Systems", "Singleton", redfish.SystemsURI},
		{"Managers", "Singleton", redfish.ManagersURI},
		{"Chassis", "Singleton", redfish.ChassisURI},
		{"SessionService", "Singleton", redfish.SessionServiceURI},
		{"Sessions", "Singleton", redfish.SessionsURI},
		{"AccountService", "Singleton", redfish.AccountServiceURI},
		{"TaskService", "Singleton", redfish.TaskServiceURI},
	}})
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
