package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pythonEnv overrides the interpreter. The default is Debian's, which sees python3-sushy; a
// python3 earlier on PATH (pyenv, a venv) usually does not.
const pythonEnv = "KRF_PYTHON"

func python() string {
	if p := os.Getenv(pythonEnv); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// requireSushy fails the test when the interpreter cannot import sushy, and returns sushy's
// version.
func requireSushy(t *testing.T) string {
	t.Helper()
	py := python()
	out, err := exec.Command(py, "-c", "import sushy; print(sushy.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("the real-client tests need the sushy library, but %s cannot import it (%v):\n%s\n"+
			"Install it with `apt-get install -y python3-sushy` (or point $%s at a python3 that has sushy).",
			py, err, strings.TrimSpace(string(out)), pythonEnv)
	}
	return strings.TrimSpace(string(out))
}

// sushySteps are the steps sushy_ironic.py must report as passed, in order.
var sushySteps = []string{
	"connect", "get_system", "allowed_values", "managers", "chassis", "force_off_if_on",
	"set_boot_mode_legacy", "set_boot_mode_uefi",
	"set_boot_cd_once", "power_on", "once_consumed_by_boot",
	"set_boot_pxe_once_while_on", "force_restart", "once_consumed_by_restart",
	"set_boot_hdd_continuous", "ironic_reboot", "continuous_kept_after_reboot",
	"graceful_shutdown", "inventory", "close",
}

// scriptLine is one JSON line of sushy_ironic.py's output: a step or the final result.
type scriptLine struct {
	Step    string  `json:"step"`
	OK      bool    `json:"ok"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error"`

	Result        string            `json:"result"`
	Notes         []json.RawMessage `json:"notes"`
	SushyWarnings []json.RawMessage `json:"sushy_warnings"`

	// Steps holds, on the result line runSushy returns, every passed step's line by name.
	Steps map[string]json.RawMessage `json:"-"`
}

// TestSushyIronicFlow drives a system through the real sushy library the way Ironic does
// (see sushy_ironic.py): power, boot mode, one-time and continuous boot overrides, restarts,
// links to managers and chassis.
func TestSushyIronicFlow(t *testing.T) {
	t.Parallel()
	version := requireSushy(t)
	t.Logf("sushy %s (%s)", version, python())

	t.Run("explicit system", func(t *testing.T) {
		t.Parallel()
		st := startServer(t)
		runSushy(t, st, sushyRun{user: st.User, system: "/redfish/v1/Systems/tenant-a.cp-0", steps: sushySteps})
	})
	t.Run("only system of the user", func(t *testing.T) {
		// metal3's redfish_system_id "/redfish/v1/": sushy picks the single member of Systems.
		t.Parallel()
		st := startServer(t)
		runSushy(t, st, sushyRun{user: st.SingleUser, system: "/redfish/v1/", steps: sushySteps})
	})
}

// sushyRun is one run of sushy_ironic.py.
type sushyRun struct {
	user, system string
	// args are extra command line arguments (--flow vmedia ...).
	args []string
	// steps are the steps the run must report as passed, in order.
	steps []string
}

func runSushy(t *testing.T, st *Stack, run sushyRun) *scriptLine {
	t.Helper()
	script, err := filepath.Abs("sushy_ironic.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python(), append([]string{script}, run.args...)...)
	cmd.Env = append(os.Environ(),
		"KRF_BASE_URL="+st.BaseURL, "KRF_USER="+run.user, "KRF_PASSWORD="+st.Password, "KRF_SYSTEM="+run.system,
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
		// The script talks to the in-process server (and serves images) on loopback only.
		"no_proxy=*", "NO_PROXY=*")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	started := time.Now()
	runErr := cmd.Run()
	took := time.Since(started)

	var passed []string
	var result *scriptLine
	steps := map[string]json.RawMessage{}
	var parseErrs []string
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l scriptLine
		if err := json.Unmarshal(line, &l); err != nil {
			parseErrs = append(parseErrs, fmt.Sprintf("%v: %s", err, line))
			continue
		}
		switch {
		case l.Step != "" && l.OK:
			passed = append(passed, l.Step)
			steps[l.Step] = append(json.RawMessage(nil), line...)
			if testing.Verbose() {
				t.Logf("step %-28s ok  %s", l.Step, line)
			} else {
				t.Logf("step %-28s ok  %6.3fs", l.Step, l.Seconds)
			}
		case l.Step != "":
			t.Logf("step %-28s FAILED: %s", l.Step, l.Error)
		case l.Result != "":
			result = &l
		}
	}

	failed := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\n--- sushy_ironic.py stdout:\n%s--- stderr:\n%s", fmt.Sprintf(format, args...), stdout.String(), stderr.String())
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		failed("sushy_ironic.py did not finish within its timeout (%v)", took.Round(time.Millisecond))
	case errors.As(runErr, &exitErr):
		failed("sushy_ironic.py exited with %d after %v", exitErr.ExitCode(), took.Round(time.Millisecond))
	case runErr != nil:
		failed("running %s %s: %v", python(), script, runErr)
	case len(parseErrs) > 0:
		failed("sushy_ironic.py printed lines that are not JSON:\n%s", strings.Join(parseErrs, "\n"))
	case result == nil || result.Result != "PASS":
		failed("sushy_ironic.py exited 0 without a PASS result line")
	case strings.Join(passed, ",") != strings.Join(run.steps, ","):
		failed("steps passed: %v\nwant:         %v", passed, run.steps)
	}
	result.Steps = steps
	t.Logf("sushy flow passed in %v", took.Round(time.Millisecond))
	for _, n := range result.Notes {
		t.Logf("note: %s", n)
	}
	for _, w := range result.SushyWarnings {
		t.Logf("sushy logged (expected): %s", w)
	}
	return result
}
