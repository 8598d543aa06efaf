package clients

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// redfishtool finds DMTF's redfishtool (Debian package redfishtool) or fails the test.
func redfishtool(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"redfishtool", "/usr/bin/redfishtool"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatalf("the real-client tests need DMTF's redfishtool, which is not installed. " +
		"Install it with `apt-get install -y redfishtool`.")
	return ""
}

// rft runs one redfishtool command against the stack.
type rft struct {
	t    *testing.T
	bin  string
	st   *Stack
	user string
}

// run returns redfishtool's stdout and exit code; stderr goes to the test log on failure.
func (r rft) run(args ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// -S Never: the in-process server speaks plain HTTP; redfishtool's default switches to
	// https whenever it sends credentials. -T: per-request timeout. -W 1:3 is the default.
	full := append([]string{"-r", r.st.Host(), "-u", r.user, "-p", r.st.Password, "-S", "Never", "-T", "20"}, args...)
	cmd := exec.CommandContext(ctx, r.bin, full...)
	cmd.Env = append(cmd.Environ(), "PYTHONDONTWRITEBYTECODE=1", "no_proxy=*", "NO_PROXY=*")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.t.Fatalf("redfishtool %s: timed out\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, stderr.String())
	case errors.As(err, &exitErr):
		r.t.Logf("redfishtool %s: exit %d, stderr: %s", strings.Join(args, " "), exitErr.ExitCode(), strings.TrimSpace(stderr.String()))
		return string(out), exitErr.ExitCode()
	case err != nil:
		r.t.Fatalf("redfishtool %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// ok runs a command that must succeed and print one JSON object.
func (r rft) ok(args ...string) map[string]any {
	r.t.Helper()
	out, code := r.run(args...)
	if code != 0 {
		r.t.Fatalf("redfishtool %s: exit %d, want 0; stdout:\n%s", strings.Join(args, " "), code, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		r.t.Fatalf("redfishtool %s: output is not one JSON object (%v):\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// fails runs a command that must fail with the given exit code.
func (r rft) fails(code int, args ...string) {
	r.t.Helper()
	out, got := r.run(args...)
	if got != code {
		r.t.Fatalf("redfishtool %s: exit %d, want %d; stdout:\n%s", strings.Join(args, " "), got, code, out)
	}
}

func str(v any, path ...string) string {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// waitPower polls PowerState through redfishtool until it is want.
func (r rft) waitPower(sys, want string) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var seen []string
	for {
		got := str(r.ok("Systems", "-L", systemLink(sys), "-P", "PowerState"), "PowerState")
		if len(seen) == 0 || seen[len(seen)-1] != got {
			seen = append(seen, got)
		}
		if got == want {
			r.t.Logf("%s: PowerState %v", sys, seen)
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: PowerState did not become %s within 30s (seen %v)", sys, want, seen)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// systemLink is the path of a system. -L names a member by link (one GET); -I by Id, which
// redfishtool resolves by reading every member of the collection.
func systemLink(id string) string { return "/redfish/v1/Systems/" + id }

// boot reads Boot through redfishtool and returns target and enabled.
func (r rft) boot(sys string) (string, string) {
	r.t.Helper()
	b := r.ok("Systems", "-L", systemLink(sys), "-P", "Boot")
	return str(b, "Boot", "BootSourceOverrideTarget"), str(b, "Boot", "BootSourceOverrideEnabled")
}

// waitBoot polls Boot until it shows target+enabled.
func (r rft) waitBoot(sys, target, enabled string) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		t, e := r.boot(sys)
		if t == target && e == enabled {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: Boot is %s+%s, want %s+%s", sys, t, e, target, enabled)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestRedfishtool drives the server with DMTF's redfishtool: listing and reading resources,
// reset, setBootOverride, and the errors the tool derives from the advertised allowable values.
func TestRedfishtool(t *testing.T) {
	t.Parallel()
	bin := redfishtool(t)
	st := startServer(t)
	r := rft{t: t, bin: bin, st: st, user: st.User}
	const sys = "tenant-a.cp-0"
	started := time.Now()

	if v := r.ok("versions"); str(v, "v1") != "/redfish/v1/" {
		t.Errorf("versions: %v", v)
	}
	if v := r.ok("root"); str(v, "RedfishVersion") == "" || str(v, "Systems", "@odata.id") != "/redfish/v1/Systems" {
		t.Errorf("root: %v", v)
	}

	// Systems list GETs every member and lists its Id and @odata.id.
	list := r.ok("Systems", "list")
	var ids []string
	members, _ := list["Members"].([]any)
	for _, m := range members {
		id, link := str(m, "Id"), str(m, "@odata.id")
		if link != "/redfish/v1/Systems/"+id {
			t.Errorf("Systems list: member %v: @odata.id does not end in its Id", m)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if want := "tenant-a.cp-0,tenant-a.cp-1,tenant-a.cp-2,tenant-b.cp-0"; strings.Join(ids, ",") != want {
		t.Errorf("Systems list: ids %v, want %s", ids, want)
	}
	if coll := r.ok("Systems"); coll["Members@odata.count"] != float64(4) {
		t.Errorf("Systems collection: Members@odata.count = %v, want 4", coll["Members@odata.count"])
	}

	// Get a system by Id (redfishtool finds it by reading the collection's members).
	s := r.ok("Systems", "-I", sys)
	if str(s, "Id") != sys || str(s, "PowerState") != "Off" || str(s, "Manufacturer") != "KubeVirt" || str(s, "UUID") == "" {
		t.Errorf("Systems -I %s: Id %q PowerState %q Manufacturer %q UUID %q", sys, str(s, "Id"), str(s, "PowerState"), str(s, "Manufacturer"), str(s, "UUID"))
	}
	// ... and by link.
	if s := r.ok("Systems", "-L", systemLink(sys)); str(s, "Id") != sys {
		t.Errorf("Systems -L: Id %q", str(s, "Id"))
	}
	for _, kind := range []string{"Managers", "Chassis"} {
		if v := r.ok(kind, "-I", sys); str(v, "Id") != sys {
			t.Errorf("%s -I %s: Id %q", kind, sys, str(v, "Id"))
		}
	}

	// Boot override Once Cd while off: redfishtool checks the target against
	// BootSourceOverrideTarget@Redfish.AllowableValues, GETs for the ETag and PATCHes with If-Match.
	patched := r.ok("Systems", "-I", sys, "setBootOverride", "Once", "Cd")
	if got := str(patched, "Boot", "BootSourceOverrideTarget") + "+" + str(patched, "Boot", "BootSourceOverrideEnabled"); got != "Cd+Once" {
		t.Errorf("setBootOverride Once Cd printed Boot %s, want Cd+Once", got)
	}
	if tgt, en := r.boot(sys); tgt != "Cd" || en != "Once" {
		t.Fatalf("after setBootOverride Once Cd: Boot %s+%s", tgt, en)
	}

	// Power on; the boot consumes the Once override.
	if out, code := r.run("Systems", "-I", sys, "reset", "On"); code != 0 {
		t.Fatalf("reset On: exit %d\n%s", code, out)
	}
	r.waitPower(sys, "On")
	r.waitBoot(sys, "None", "Disabled")

	// Continuous override, then Disabled.
	r.ok("Systems", "-I", sys, "setBootOverride", "Continuous", "Hdd")
	if tgt, en := r.boot(sys); tgt != "Hdd" || en != "Continuous" {
		t.Errorf("after setBootOverride Continuous Hdd: Boot %s+%s", tgt, en)
	}
	r.ok("Systems", "-I", sys, "setBootOverride", "Disabled")
	if tgt, en := r.boot(sys); tgt != "None" || en != "Disabled" {
		t.Errorf("after setBootOverride Disabled: Boot %s+%s", tgt, en)
	}

	// Values the service does not advertise are refused by redfishtool itself (exit 8).
	r.fails(8, "Systems", "-I", sys, "reset", "Nmi")
	r.fails(8, "Systems", "-I", sys, "setBootOverride", "Once", "Usb")

	// Errors from the service: a target outside the allowed list sent raw is a 400, an unknown
	// system a 404, a wrong password a 401; redfishtool exits 5 for each.
	r.fails(5, "-d", `{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, "raw", "PATCH", "/redfish/v1/Systems/"+sys)
	r.fails(5, "raw", "GET", "/redfish/v1/Systems/tenant-a.nope")
	bad := r
	bad.st = &Stack{BaseURL: st.BaseURL, Password: "wrong-" + st.Password}
	bad.fails(5, "Systems")

	// The single-system user sees one system; -1 picks it.
	one := rft{t: t, bin: bin, st: st, user: st.SingleUser}
	if v := one.ok("Systems", "-1"); str(v, "Id") != st.SingleSystem {
		t.Errorf("Systems -1 as %s: Id %q, want %s", st.SingleUser, str(v, "Id"), st.SingleSystem)
	}
	one.fails(5, "raw", "GET", "/redfish/v1/Systems/"+sys)

	// ForceRestart and GracefulShutdown.
	r.ok("Systems", "-I", sys, "setBootOverride", "Once", "Pxe")
	if out, code := r.run("Systems", "-I", sys, "reset", "ForceRestart"); code != 0 {
		t.Fatalf("reset ForceRestart: exit %d\n%s", code, out)
	}
	r.waitPower(sys, "On")
	r.waitBoot(sys, "None", "Disabled") // only a new boot consumes the Once override
	if out, code := r.run("Systems", "-I", sys, "reset", "GracefulShutdown"); code != 0 {
		t.Fatalf("reset GracefulShutdown: exit %d\n%s", code, out)
	}
	r.waitPower(sys, "Off")
	t.Logf("redfishtool flow passed in %v", time.Since(started).Round(time.Millisecond))
}
