package clients

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// gofishVersion is the gofish release go.mod requires; the test reports it.
const gofishVersion = "v0.22.0"

// TestGofish drives the server with gofish, the Go Redfish library (used by metal3's tooling,
// Terraform providers and many operators' own scripts): once with HTTP Basic on every request
// (ClientConfig.BasicAuth) and once with a session login (the default), each on a system of
// its own of one stack. Every read is a fresh GET through gofish, so that whatever gofish
// cannot parse fails the test; the HTTP exchanges are traced and shown on failure.
func TestGofish(t *testing.T) {
	t.Parallel()
	st := startServer(t)
	img := newSlowImageServer(t, 1<<20, 5*time.Millisecond)
	t.Logf("gofish %s", gofishVersion)

	t.Run("basic auth", func(t *testing.T) {
		t.Parallel()
		gofishFlow(t, st, img.URL, true, "tenant-a.cp-0")
	})
	t.Run("session", func(t *testing.T) {
		t.Parallel()
		gofishFlow(t, st, img.URL, false, "tenant-a.cp-1")
	})
}

// gf is one gofish connection with its HTTP trace.
type gf struct {
	t     *testing.T
	c     *gofish.APIClient
	trace *httpTrace
}

// fail reports a gofish error with the exchanges that led to it.
func (g *gf) fail(what string, err error) {
	g.t.Helper()
	g.t.Fatalf("gofish %s: %v\n%s", what, err, g.trace.last(12))
}

func (g *gf) check(what string, err error) {
	g.t.Helper()
	if err != nil {
		g.fail(what, err)
	}
}

func (g *gf) system(path string) *schemas.ComputerSystem {
	g.t.Helper()
	s, err := schemas.GetComputerSystem(g.c, path)
	g.check("GetComputerSystem "+path, err)
	return s
}

func (g *gf) waitPower(path string, want schemas.PowerState) []schemas.PowerState {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var seen []schemas.PowerState
	for {
		got := g.system(path).PowerState
		if len(seen) == 0 || seen[len(seen)-1] != got {
			seen = append(seen, got)
		}
		if got == want {
			return seen
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: PowerState did not become %s within 30s (seen %v)", path, want, seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// media returns the one CD member of the system's VirtualMedia, looked up through the
// Manager (Links.ManagedBy) or the System, freshly read.
func (g *gf) media(sysPath string, viaManager bool) *schemas.VirtualMedia {
	g.t.Helper()
	sys := g.system(sysPath)
	var members []*schemas.VirtualMedia
	var err error
	where := "System.VirtualMedia"
	if viaManager {
		where = "Manager.VirtualMedia"
		mgrs, merr := sys.ManagedBy()
		g.check("ComputerSystem.ManagedBy", merr)
		if len(mgrs) != 1 {
			g.t.Fatalf("%s: Links.ManagedBy has %d managers, want 1", sysPath, len(mgrs))
		}
		members, err = mgrs[0].VirtualMedia()
	} else {
		members, err = sys.VirtualMedia()
	}
	g.check(where, err)
	var cds []*schemas.VirtualMedia
	for _, m := range members {
		if slices.Contains(m.MediaTypes, schemas.CDVirtualMediaType) {
			cds = append(cds, m)
		}
	}
	if len(cds) != 1 {
		g.t.Fatalf("%s of %s: %d CD members, want 1", where, sysPath, len(cds))
	}
	return cds[0]
}

func gofishFlow(t *testing.T, st *Stack, imageBase string, basic bool, sysID string) {
	started := time.Now()
	trace := &httpTrace{password: st.Password}
	cfg := gofish.ClientConfig{
		Endpoint: st.BaseURL, Username: st.User, Password: st.Password, BasicAuth: basic,
		HTTPClient: &http.Client{Transport: trace, Timeout: 30 * time.Second},
	}
	c, err := gofish.Connect(cfg)
	if err != nil {
		t.Fatalf("gofish.Connect (BasicAuth %v): %v\n%s", basic, err, trace.last(12))
	}
	g := &gf{t: t, c: c, trace: trace}
	sysPath := "/redfish/v1/Systems/" + sysID

	// Connect: Basic sends credentials on every request; a session login POSTs to
	// Links.Sessions and then sends X-Auth-Token.
	sess, err := c.GetSession()
	switch {
	case basic && err == nil:
		t.Fatalf("BasicAuth connection has a session: %+v", sess)
	case !basic && err != nil:
		g.fail("GetSession after a session login", err)
	case !basic && (sess.Token == "" || !strings.HasPrefix(sess.ID, "/redfish/v1/SessionService/Sessions/")):
		t.Fatalf("session login: token %q, session %q", sess.Token, sess.ID)
	}
	if !basic {
		t.Logf("session %s", sess.ID)
	}
	if svc := c.GetService(); svc.RedfishVersion == "" || svc.UUID == "" {
		t.Errorf("service root: RedfishVersion %q UUID %q", svc.RedfishVersion, svc.UUID)
	}

	// Enumerate.
	svc := c.GetService()
	systems, err := svc.Systems()
	g.check("Service.Systems", err)
	managers, err := svc.Managers()
	g.check("Service.Managers", err)
	chassis, err := svc.Chassis()
	g.check("Service.Chassis", err)
	ids := func(n int, id func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id(i)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2", "tenant-b.cp-0"}
	if got := ids(len(systems), func(i int) string { return systems[i].ID }); !slices.Equal(got, want) {
		t.Errorf("Systems: %v, want %v", got, want)
	}
	if got := ids(len(managers), func(i int) string { return managers[i].ID }); !slices.Equal(got, want) {
		t.Errorf("Managers: %v, want %v", got, want)
	}
	uuids := map[string]string{}
	for _, s := range systems {
		uuids[s.ID] = s.UUID
	}
	var vmChassis []string
	for _, ch := range chassis {
		if strings.HasPrefix(ch.ID, "Node-") {
			// A hosting node's chassis (present while a VM runs on it) has no UUID.
			if ch.UUID != "" {
				t.Errorf("node chassis %s has UUID %q", ch.ID, ch.UUID)
			}
			continue
		}
		vmChassis = append(vmChassis, ch.ID)
		if ch.UUID == "" || ch.UUID != uuids[ch.ID] {
			t.Errorf("chassis %s: UUID %q, want the system's %q", ch.ID, ch.UUID, uuids[ch.ID])
		}
	}
	if slices.Sort(vmChassis); !slices.Equal(vmChassis, want) {
		t.Errorf("Chassis of VMs: %v, want %v", vmChassis, want)
	}
	for _, m := range managers {
		if m.FirmwareVersion == "" || m.ManagerType != schemas.BMCManagerType {
			t.Errorf("manager %s: FirmwareVersion %q ManagerType %q", m.ID, m.FirmwareVersion, m.ManagerType)
		}
	}

	// Read the ComputerSystem.
	sys := g.system(sysPath)
	if sys.ID != sysID || sys.Manufacturer != "KubeVirt" || sys.PowerState != schemas.OffPowerState {
		t.Errorf("%s: Id %q Manufacturer %q PowerState %q", sysPath, sys.ID, sys.Manufacturer, sys.PowerState)
	}
	if _, err := uuid.Parse(sys.UUID); err != nil {
		t.Errorf("%s: UUID %q: %v", sysPath, sys.UUID, err)
	}
	for _, tg := range []schemas.BootSource{schemas.PxeBootSource, schemas.HddBootSource, schemas.CdBootSource} {
		if !slices.Contains(sys.Boot.AllowableBootSourceOverrideTargetValues, tg) {
			t.Errorf("Boot: %s not in BootSourceOverrideTarget@Redfish.AllowableValues %v", tg, sys.Boot.AllowableBootSourceOverrideTargetValues)
		}
	}
	if sys.Boot.BootSourceOverrideMode != schemas.UEFIBootSourceOverrideMode {
		t.Errorf("Boot.BootSourceOverrideMode %q", sys.Boot.BootSourceOverrideMode)
	}
	mgrs, err := sys.ManagedBy()
	g.check("ComputerSystem.ManagedBy", err)
	chs, err := sys.Chassis()
	g.check("ComputerSystem.Chassis", err)
	if len(mgrs) != 1 || mgrs[0].ID != sysID || len(chs) != 1 || chs[0].ID != sysID || chs[0].UUID != sys.UUID {
		t.Errorf("%s: links to managers %d, chassis %d (chassis UUID %v)", sysPath, len(mgrs), len(chs), chassisUUIDs(chs))
	}

	// Reset On and ForceOff; gofish checks the type against the advertised values first.
	types, err := sys.GetSupportedResetTypes()
	g.check("GetSupportedResetTypes", err)
	for _, rt := range []schemas.ResetType{schemas.OnResetType, schemas.ForceOffResetType} {
		if !slices.Contains(types, rt) {
			t.Fatalf("reset type %s not advertised: %v", rt, types)
		}
	}
	// gofish POSTs actions with the resource's ETag as If-Match (and retries without it on a
	// 412); the service checks If-Match only on PATCH.
	if _, err := sys.Reset(schemas.OnResetType); err != nil {
		g.fail("Reset On", err)
	}
	t.Logf("On: PowerState %v", g.waitPower(sysPath, schemas.OnPowerState))
	stale := g.system(sysPath) // read while On
	if _, err := stale.Reset(schemas.ForceOffResetType); err != nil {
		g.fail("Reset ForceOff", err)
	}
	t.Logf("ForceOff: PowerState %v", g.waitPower(sysPath, schemas.OffPowerState))

	// A PATCH through the object read while On carries that ETag as If-Match: the service
	// must refuse it with 412 (gofish does not retry a PATCH without If-Match).
	if stale.ODataEtag != "" {
		err := stale.SetBoot(&schemas.Boot{BootSourceOverrideTarget: schemas.PxeBootSource})
		if !schemas.Is412PreconditionFailed(err) {
			t.Errorf("SetBoot through an object read before the power change (If-Match %s): %v, want a 412", stale.ODataEtag, err)
		}
		g.trace.expect(http.MethodPatch, sysPath, http.StatusPreconditionFailed)
	} else {
		t.Logf("%s has no ETag: the stale If-Match check is skipped", sysPath)
	}

	// Boot overrides, each through a freshly read object and verified by a fresh read.
	for _, b := range []struct {
		target  schemas.BootSource
		enabled schemas.BootSourceOverrideEnabled
	}{
		{schemas.CdBootSource, schemas.OnceBootSourceOverrideEnabled},
		{schemas.HddBootSource, schemas.ContinuousBootSourceOverrideEnabled},
	} {
		err := g.system(sysPath).SetBoot(&schemas.Boot{BootSourceOverrideTarget: b.target, BootSourceOverrideEnabled: b.enabled})
		g.check(fmt.Sprintf("SetBoot %s+%s", b.target, b.enabled), err)
		got := g.system(sysPath).Boot
		if got.BootSourceOverrideTarget != b.target || got.BootSourceOverrideEnabled != b.enabled || got.BootSourceOverrideMode != schemas.UEFIBootSourceOverrideMode {
			t.Errorf("after SetBoot %s+%s: Boot %s+%s mode %s", b.target, b.enabled, got.BootSourceOverrideTarget,
				got.BootSourceOverrideEnabled, got.BootSourceOverrideMode)
		}
	}

	// Virtual media: the member found through the Manager and through the System is the same.
	viaMgr, viaSys := g.media(sysPath, true), g.media(sysPath, false)
	if viaMgr.ODataID != viaSys.ODataID || !viaMgr.SupportsMediaInsert || !viaMgr.SupportsMediaEject {
		t.Fatalf("virtual media: via Manager %s (insert %v, eject %v), via System %s", viaMgr.ODataID,
			viaMgr.SupportsMediaInsert, viaMgr.SupportsMediaEject, viaSys.ODataID)
	}
	if viaSys.Inserted == nil || *viaSys.Inserted {
		t.Fatalf("%s: Inserted %v before any insert", viaSys.ODataID, viaSys.Inserted)
	}
	checkInsertMediaActionInfo(g, viaSys)

	image1, image2 := imageBase+"/gofish-"+sysID+"-1.iso", imageBase+"/gofish-"+sysID+"-2.iso"
	// Insert through the Manager's member with every parameter; eject through the System's.
	yes := true
	proto, method := schemas.HTTPTransferProtocolType, schemas.UploadTransferMethod
	_, err = viaMgr.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: image1, Inserted: &yes, WriteProtected: &yes,
		TransferProtocolType: &proto, TransferMethod: &method})
	g.check("InsertMedia (member via the Manager)", err)
	g.mediaShows(sysPath, image1)
	_, err = g.media(sysPath, false).EjectMedia()
	g.check("EjectMedia (member via the System)", err)
	g.mediaShows(sysPath, "")
	// Insert through the System's member with Image alone (Inserted and WriteProtected default
	// to true); eject through the Manager's.
	_, err = g.media(sysPath, false).InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: image2})
	g.check("InsertMedia (member via the System, Image only)", err)
	g.mediaShows(sysPath, image2)
	_, err = g.media(sysPath, true).EjectMedia()
	g.check("EjectMedia (member via the Manager)", err)
	g.mediaShows(sysPath, "")

	// Inventory through gofish: whatever it reads must parse.
	gofishInventory(g, sysPath)

	// No request of the flow failed but those expected.
	if bad := trace.unexpected(); len(bad) > 0 {
		t.Errorf("unexpected HTTP errors:\n  %s", strings.Join(bad, "\n  "))
	}

	if !basic {
		c.Logout()
		// The session is gone: its token no longer works.
		req, _ := http.NewRequest(http.MethodGet, st.BaseURL+sysPath, nil)
		req.Header.Set("X-Auth-Token", sess.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET with the token after Logout: %d, want 401", resp.StatusCode)
		}
		if d := trace.find(http.MethodDelete, sess.ID); d == nil || d.status >= 300 {
			t.Errorf("Logout did not DELETE %s: %v", sess.ID, d)
		}
	}
	t.Logf("gofish flow (BasicAuth %v) on %s passed in %v, %d requests", basic, sysID,
		time.Since(started).Round(time.Millisecond), trace.count())
}

func chassisUUIDs(chs []*schemas.Chassis) []string {
	out := make([]string, len(chs))
	for i, c := range chs {
		out[i] = c.UUID
	}
	return out
}

// mediaShows checks, by fresh reads through the System and the Manager, that the drive holds
// image ("" for none).
func (g *gf) mediaShows(sysPath, image string) {
	g.t.Helper()
	for _, viaMgr := range []bool{false, true} {
		m := g.media(sysPath, viaMgr)
		inserted := m.Inserted != nil && *m.Inserted
		if m.Image != image || inserted != (image != "") {
			g.t.Fatalf("%s (via Manager %v): Image %q Inserted %v, want %q", m.ODataID, viaMgr, m.Image, m.Inserted, image)
		}
		if image != "" && (m.WriteProtected == nil || !*m.WriteProtected || m.ConnectedVia != schemas.URIConnectedVia ||
			m.TransferProtocolType != schemas.HTTPVirtualMediaTransferProtocolType) {
			g.t.Errorf("%s: WriteProtected %v ConnectedVia %q TransferProtocolType %q", m.ODataID, m.WriteProtected,
				m.ConnectedVia, m.TransferProtocolType)
		}
	}
}

// checkInsertMediaActionInfo reads the InsertMedia ActionInfo through gofish.
func checkInsertMediaActionInfo(g *gf, m *schemas.VirtualMedia) {
	g.t.Helper()
	info, err := m.InsertMediaActionInfo()
	g.check("VirtualMedia.InsertMediaActionInfo", err)
	params := map[string]schemas.ActionInfoParameter{}
	for _, p := range info.Parameters {
		params[p.Name] = p
	}
	if p := params["Image"]; !p.Required || p.DataType != schemas.StringParameterTypes {
		g.t.Errorf("ActionInfo %s: Image %+v", info.ODataID, p)
	}
	for name, want := range map[string][]string{"TransferProtocolType": {"HTTP", "HTTPS"}, "TransferMethod": {"Stream", "Upload"},
		"Inserted": {"true"}, "WriteProtected": {"true"}} {
		if got := params[name].AllowableValues; !slices.Equal(got, want) || params[name].Required {
			g.t.Errorf("ActionInfo %s: %s AllowableValues %v (Required %v), want %v", info.ODataID, name, got, params[name].Required, want)
		}
	}
	protos, err := info.GetParamValues("TransferProtocolType", schemas.StringParameterTypes)
	g.check("ActionInfo.GetParamValues TransferProtocolType", err)
	if !slices.Equal(protos, []string{"HTTP", "HTTPS"}) {
		g.t.Errorf("GetParamValues TransferProtocolType: %v", protos)
	}
	for _, n := range []string{"UserName", "Password"} {
		if p, ok := params[n]; !ok || p.DataType != schemas.StringParameterTypes {
			g.t.Errorf("ActionInfo %s: %s %+v", info.ODataID, n, p)
		}
	}
	// gofish's EjectMediaActionInfo follows the InsertMedia action's @Redfish.ActionInfo (a
	// gofish bug); the service has no ActionInfo for EjectMedia, which takes no parameters.
	if ej, err := m.EjectMediaActionInfo(); err == nil && ej.ODataID == info.ODataID {
		g.t.Logf("gofish problem: VirtualMedia.EjectMediaActionInfo() returned the InsertMedia ActionInfo %s "+
			"(it reads insertMedia.ActionInfoTarget)", ej.ODataID)
	}
}

// gofishInventory reads what Ironic's inspection reads, through gofish's types.
func gofishInventory(g *gf, sysPath string) {
	g.t.Helper()
	t := g.t
	sys := g.system(sysPath)
	if sys.MemorySummary.TotalSystemMemoryGiB == nil || *sys.MemorySummary.TotalSystemMemoryGiB <= 0 {
		t.Errorf("MemorySummary.TotalSystemMemoryGiB %v", sys.MemorySummary.TotalSystemMemoryGiB)
	}
	procs, err := sys.Processors()
	g.check("ComputerSystem.Processors", err)
	threads := 0
	for _, p := range procs {
		if p.ProcessorArchitecture != schemas.X86ProcessorArchitecture || p.InstructionSet != schemas.X8664InstructionSet || p.TotalThreads == nil {
			t.Errorf("processor %s: ProcessorArchitecture %q InstructionSet %q TotalThreads %v", p.ODataID, p.ProcessorArchitecture, p.InstructionSet, p.TotalThreads)
		} else {
			threads += *p.TotalThreads
		}
	}
	if threads == 0 {
		t.Errorf("processors %d with %d threads", len(procs), threads)
	}
	nics, err := sys.EthernetInterfaces()
	g.check("ComputerSystem.EthernetInterfaces", err)
	var macs []string
	for _, n := range nics {
		if n.Status.State == schemas.EnabledState {
			macs = append(macs, strings.ToLower(n.MACAddress))
		}
	}
	if len(macs) == 0 {
		t.Errorf("no Enabled EthernetInterface with a MAC: %d members", len(nics))
	}
	simple, err := sys.SimpleStorage()
	g.check("ComputerSystem.SimpleStorage", err)
	var disks []uint
	for _, ss := range simple {
		for _, d := range ss.Devices {
			if d.CapacityBytes != nil {
				disks = append(disks, *d.CapacityBytes)
			}
		}
	}
	storage, err := sys.Storage()
	g.check("ComputerSystem.Storage", err)
	var drives, volumes []int
	for _, s := range storage {
		ds, err := s.Drives()
		g.check("Storage.Drives", err)
		for _, d := range ds {
			if d.CapacityBytes != nil {
				drives = append(drives, *d.CapacityBytes)
			}
		}
		vs, err := s.Volumes()
		g.check("Storage.Volumes", err)
		for _, v := range vs {
			if v.CapacityBytes != nil {
				volumes = append(volumes, *v.CapacityBytes)
			}
		}
	}
	const rootDisk = 120 << 30
	if !slices.Contains(disks, rootDisk) || !slices.Contains(drives, rootDisk) || !slices.Contains(volumes, rootDisk) {
		t.Errorf("disk sizes: SimpleStorage %v, Drives %v, Volumes %v; want the 120 GiB root disk in each", disks, drives, volumes)
	}
	bios, err := sys.Bios()
	g.check("ComputerSystem.Bios", err)
	if bios == nil || len(bios.Attributes) == 0 {
		t.Errorf("Bios has no Attributes")
	}
	sb, err := sys.SecureBoot()
	g.check("ComputerSystem.SecureBoot", err)
	if sb == nil {
		t.Errorf("no SecureBoot")
	}
	chs, err := sys.Chassis()
	g.check("ComputerSystem.Chassis", err)
	for _, ch := range chs {
		_, err := ch.Drives()
		g.check("Chassis.Drives", err)
	}
	ts, err := g.c.GetService().Tasks()
	g.check("Service.Tasks", err)
	if ts != nil {
		_, err := ts.Tasks()
		g.check("TaskService.Tasks", err)
	}
	t.Logf("inventory via gofish: memory %v GiB, %d processors (%d threads), MACs %v, disks %v, bios attributes %d, secure boot %v",
		*sys.MemorySummary.TotalSystemMemoryGiB, len(procs), threads, macs, disks, len(bios.Attributes), sb.SecureBootEnable)
}

// httpTrace is an http.RoundTripper that records every exchange (credentials redacted).
type httpTrace struct {
	password string
	mu       sync.Mutex
	log      []exchange
	// expected are the failed exchanges a flow provoked on purpose: method, path, status.
	expected []exchange
}

// expect marks the next failed exchange of method, path and status as provoked on purpose.
func (h *httpTrace) expect(method, path string, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expected = append(h.expected, exchange{method: method, path: path, status: status})
}

// unexpected lists the exchanges that failed (status 400 or more, or no response) and were
// not expected.
func (h *httpTrace) unexpected() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	exp := slices.Clone(h.expected)
	var out []string
	for _, e := range h.log {
		if e.err == nil && e.status < 400 {
			continue
		}
		if i := slices.IndexFunc(exp, func(x exchange) bool {
			return x.method == e.method && x.path == e.path && x.status == e.status
		}); i >= 0 {
			exp = slices.Delete(exp, i, i+1)
			continue
		}
		out = append(out, e.String())
	}
	return out
}

type exchange struct {
	method, path string
	status       int
	reqBody      string
	respBody     string
	err          error
}

func (e *exchange) String() string {
	if e == nil {
		return "<none>"
	}
	s := fmt.Sprintf("%s %s", e.method, e.path)
	if e.reqBody != "" {
		s += " " + e.reqBody
	}
	if e.err != nil {
		return s + " -> error " + e.err.Error()
	}
	s += fmt.Sprintf(" -> %d", e.status)
	if e.respBody != "" {
		s += " " + e.respBody
	}
	return s
}

func (h *httpTrace) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchange{method: req.Method, path: req.URL.RequestURI()}
	if req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			body, _ := io.ReadAll(b)
			ex.reqBody = h.redact(string(body))
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		ex.err = err
	} else {
		ex.status = resp.StatusCode
		if resp.StatusCode >= 300 {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if rerr == nil {
				ex.respBody = truncate(string(body), 600)
			}
		}
	}
	h.mu.Lock()
	h.log = append(h.log, ex)
	h.mu.Unlock()
	return resp, err
}

func (h *httpTrace) redact(s string) string {
	if h.password != "" {
		s = strings.ReplaceAll(s, h.password, "***")
	}
	return s
}

func (h *httpTrace) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.log)
}

func (h *httpTrace) find(method, path string) *exchange {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.log) - 1; i >= 0; i-- {
		if h.log[i].method == method && h.log[i].path == path {
			e := h.log[i]
			return &e
		}
	}
	return nil
}

func (h *httpTrace) last(n int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	b.WriteString("last HTTP exchanges (oldest first):\n")
	for _, e := range h.log[max(0, len(h.log)-n):] {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
