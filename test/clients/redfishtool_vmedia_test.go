package clients

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedfishtoolVirtualMedia inserts and ejects virtual media with DMTF's redfishtool, as a
// script would. redfishtool 1.1.5 has no virtual media subcommand: the drive is found through
// the Manager's and the System's VirtualMedia links (-P), read with `raw GET`, and the
// InsertMedia and EjectMedia actions are POSTed with `raw POST -d`. The boot from the inserted
// image goes through setBootOverride and reset like any other.
func TestRedfishtoolVirtualMedia(t *testing.T) {
	t.Parallel()
	bin := redfishtool(t)
	st := startServer(t)
	img := newSlowImageServer(t, 1<<20, 5*time.Millisecond)
	r := rft{t: t, bin: bin, st: st, user: st.User}
	const sys = "tenant-a.cp-2"
	started := time.Now()

	// The drive, through the Manager (Links.ManagedBy) and through the System.
	mgrLink := str(r.ok("Managers", "-L", "/redfish/v1/Managers/"+sys, "-P", "VirtualMedia"), "VirtualMedia", "@odata.id")
	sysLink := str(r.ok("Systems", "-L", systemLink(sys), "-P", "VirtualMedia"), "VirtualMedia", "@odata.id")
	if mgrLink == "" || sysLink == "" {
		t.Fatalf("VirtualMedia links: Manager %q, System %q", mgrLink, sysLink)
	}
	member := func(coll string) string {
		t.Helper()
		c := r.ok("raw", "GET", coll)
		ms, _ := c["Members"].([]any)
		if len(ms) != 1 {
			t.Fatalf("%s: %d members, want 1: %v", coll, len(ms), c)
		}
		return str(ms[0], "@odata.id")
	}
	drive := member(mgrLink)
	if other := member(sysLink); other != drive {
		t.Fatalf("the Manager's collection lists %s, the System's %s", drive, other)
	}
	d := r.ok("raw", "GET", drive)
	types, _ := d["MediaTypes"].([]any)
	insert := str(d, "Actions", "#VirtualMedia.InsertMedia", "target")
	eject := str(d, "Actions", "#VirtualMedia.EjectMedia", "target")
	info := str(d, "Actions", "#VirtualMedia.InsertMedia", "@Redfish.ActionInfo")
	if !slices.Contains(types, any("CD")) || d["Inserted"] != false || insert == "" || eject == "" || info == "" {
		t.Fatalf("%s: MediaTypes %v Inserted %v InsertMedia %q (ActionInfo %q) EjectMedia %q", drive, types, d["Inserted"], insert, info, eject)
	}
	ai := r.ok("raw", "GET", info)
	params, _ := ai["Parameters"].([]any)
	var names []string
	for _, p := range params {
		names = append(names, str(p, "Name"))
	}
	if str(ai, "@odata.type") != "#ActionInfo.v1_4_2.ActionInfo" || !slices.Contains(names, "Image") {
		t.Errorf("ActionInfo %s: type %q parameters %v", info, str(ai, "@odata.type"), names)
	}

	// shows reads the drive back (raw GET) and checks what it holds ("" for nothing).
	shows := func(image, what string) {
		t.Helper()
		d := r.ok("raw", "GET", drive)
		got, _ := d["Image"].(string)
		if got != image || d["Inserted"] != (image != "") {
			t.Fatalf("%s: Image %q Inserted %v, want %q", what, got, d["Inserted"], image)
		}
	}
	// post runs a raw POST that must succeed; a 204 prints nothing.
	post := func(args ...string) {
		t.Helper()
		if out, code := r.run(args...); code != 0 {
			t.Fatalf("redfishtool %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}

	// Insert with every parameter, eject with an empty body (Basic auth).
	image1 := img.URL + "/redfishtool-1.iso"
	post("raw", "POST", insert, "-d", `{"Image":"`+image1+`","Inserted":true,"WriteProtected":true,"TransferProtocolType":"HTTP","TransferMethod":"Upload"}`)
	shows(image1, "after InsertMedia")
	post("raw", "POST", eject, "-d", `{}`)
	shows("", "after EjectMedia")

	// The same with a session (-A Session: redfishtool logs in, then DELETEs its session),
	// inserting Image alone.
	image2 := img.URL + "/redfishtool-2.iso"
	post("-A", "Session", "raw", "POST", insert, "-d", `{"Image":"`+image2+`"}`)
	shows(image2, "after InsertMedia with a session")

	// Boot from it: Cd+Once, On (which waits for the import), the boot consumes the override.
	r.ok("Systems", "-L", systemLink(sys), "setBootOverride", "Once", "Cd")
	post("Systems", "-L", systemLink(sys), "reset", "On")
	r.waitPower(sys, "On")
	r.waitBoot(sys, "None", "Disabled")
	shows(image2, "after the boot")
	post("Systems", "-L", systemLink(sys), "reset", "ForceOff")
	r.waitPower(sys, "Off")

	// EjectMedia as sushy sends it, with no body: redfishtool 1.1.5's raw POST cannot send
	// that (without -d it dies with a TypeError). When it fails so, eject with {}.
	if out, code := r.run("-A", "Session", "raw", "POST", eject); code != 0 {
		t.Logf("redfishtool problem: `raw POST` without -d exits %d (a TypeError in raw.py httpPost: "+
			"json.loads(None)); ejecting with -d {} instead. stdout: %q", code, out)
		post("-A", "Session", "raw", "POST", eject, "-d", `{}`)
	}
	shows("", "after EjectMedia with a session")

	// Errors: an image URL the service refuses (400) and a drive that does not exist (404);
	// redfishtool exits 5 for each.
	r.fails(5, "raw", "POST", insert, "-d", `{"Image":"ftp://example.invalid/x.iso"}`)
	r.fails(5, "raw", "POST", strings.Replace(insert, "/VirtualMedia/Cd/", "/VirtualMedia/Floppy/", 1), "-d", `{"Image":"`+image1+`"}`)
	shows("", "after the refused inserts")
	t.Logf("redfishtool virtual media flow passed in %v; image server: %s", time.Since(started).Round(time.Millisecond), img.summary())
}
