// Package reliability shows by test that kubevirt-redfish keeps working and loses nothing
// through hostile input, apiserver outages, crashes, races, replicas and long runs. Every
// scenario runs against a real kube-apiserver and etcd (test/testenv) with the simulator
// playing virt-controller and CDI; all traffic stays on 127.0.0.1. See RELIABILITY.md.
package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

const (
	adminUser = "admin"
	password  = "password"
)

var workDir string // binaries and scratch files of this test process

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "krf-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// ---- the cluster ----

// cluster is a real apiserver with the demo VMs and the simulator (stack.Cluster), without any
// server: each test brings its own.
type cluster struct{ *stack.Cluster }

func startCluster(t *testing.T) *cluster {
	t.Helper()
	// The simulator redials its watches like the server does, so it follows an apiserver
	// restart as quickly.
	return &cluster{stack.StartCluster(t, stack.ClusterOptions{WrapTransport: kubevirt.RetryWatches})}
}

func createVM(t *testing.T, dyn dynamic.Interface, vm *virtv1.VirtualMachine) {
	t.Helper()
	u, err := sim.ToUnstructured(vm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating VM %s/%s: %v", vm.Namespace, vm.Name, err)
	}
}

// apiVM reads a VM straight from the apiserver.
func apiVM(t *testing.T, dyn dynamic.Interface, ns, name string) *virtv1.VirtualMachine {
	t.Helper()
	u, err := dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vm := &virtv1.VirtualMachine{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// ---- the server binary ----

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// serverBinary builds cmd/kubevirt-redfish once per test process.
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { binPath, buildErr = stack.BuildServer(workDir, "") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is the real server binary running against the cluster, restartable on the same port.
type proc struct {
	t       *testing.T
	args    []string
	addr    string
	logPath string

	mu sync.Mutex
	p  *testenv.Process
}

// stopGrace bounds the wait after SIGTERM; the server's own shutdownGrace is 20 s.
const stopGrace = 25 * time.Second

// startServer writes a configuration (admin/password for every tenant), picks a port and
// starts the binary; it returns once /readyz answers 200.
func (c *cluster) startServer(t *testing.T, extraYAML string) *proc {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr := stack.FreeAddr(t)
	cfg := fmt.Sprintf(`listen: %s
tls: {insecureHTTP: true}
logLevel: info
allowlist:
  - {name: tenant-a, namespace: tenant-a}
  - {name: tenant-b, namespace: tenant-b}
users:
  - {username: %s, role: Administrator, passwordHash: '%s', allow: ["*"]}
%s`, addr, adminUser, hash, extraYAML)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, addr: addr, logPath: filepath.Join(dir, "server.log"),
		args: []string{"--config", cfgPath, "--kubeconfig", c.Env.KubeconfigPath, "--namespace", stack.Namespace}}
	p.start()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("server log (tail):\n%s", p.logTail(60))
			if dir := os.Getenv("KRF_RELIABILITY_OUT"); dir != "" {
				if b, err := os.ReadFile(p.logPath); err == nil {
					_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-server.log"), b, 0o644)
				}
			}
		}
	})
	return p
}

func (p *proc) url() string { return "http://" + p.addr }

// start runs the binary, its log appended to the earlier runs', and waits until it is ready.
func (p *proc) start() {
	p.t.Helper()
	if err := appendLine(p.logPath, "==== start "+time.Now().Format(time.RFC3339Nano)); err != nil {
		p.t.Fatal(err)
	}
	cur, err := testenv.StartProcess(exec.Command(serverBinary(p.t), p.args...), p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.p = cur
	p.mu.Unlock()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(p.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if cur.Exited() {
			p.t.Fatalf("the server exited during start:\n%s", p.logTail(40))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the server did not become ready:\n%s", p.logTail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// current is the process of the latest start.
func (p *proc) current() *testenv.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p
}

func (p *proc) pid() int { return p.current().Pid() }

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() { p.current().Kill() }

// stop sends SIGTERM and waits (SIGKILL after stopGrace).
func (p *proc) stop() { p.current().Stop(stopGrace) }

func (p *proc) alive() bool { return !p.current().Exited() }

// logTail returns the last n log lines, leaving out the audit lines of successful requests.
func (p *proc) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, `"msg":"audit"`) || !strings.Contains(l, `"result":"success"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logCount counts log lines containing s.
func (p *proc) logCount(s string) int {
	b, _ := os.ReadFile(p.logPath)
	return bytes.Count(b, []byte(s))
}

// procStats are the figures the leak checks compare.
type procStats struct {
	Goroutines int
	RSS        int64 // bytes, from /proc
	HeapInuse  int64 // bytes, go_memstats_heap_inuse_bytes
}

func (s procStats) String() string {
	return fmt.Sprintf("goroutines %d, RSS %.1f MiB, heap in use %.1f MiB", s.Goroutines, mib(s.RSS), mib(s.HeapInuse))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// stats reads the server's own /metrics and /proc status.
func (p *proc) stats() procStats {
	p.t.Helper()
	var st procStats
	resp, err := http.Get(p.url() + "/metrics")
	if err != nil {
		p.t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "go_goroutines":
			st.Goroutines = int(v)
		case "go_memstats_heap_inuse_bytes":
			st.HeapInuse = int64(v)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid())); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				st.RSS = kb << 10
			}
		}
	}
	return st
}

// ---- a small Redfish client ----

type client struct {
	base        string
	user, pass  string
	token       string
	hc          *http.Client
	closeEveryT bool // send Connection: close, as sushy does
}

func newClient(base string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &client{base: base, user: adminUser, pass: password, hc: &http.Client{Transport: tr, Timeout: 90 * time.Second}}
}

func (c *client) withToken(tok string) *client {
	cc := *c
	cc.token = tok
	return &cc
}

// result is one exchange.
type result struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
	err    error
}

func (r result) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m
}

// errorCode is the Redfish error code of an error response ("" if none).
func (r result) errorCode() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
			Info []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code
}

func (r result) errorMessage() string {
	var env struct {
		Error struct {
			Info []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	var parts []string
	for _, m := range env.Error.Info {
		parts = append(parts, m.Message)
	}
	return strings.Join(parts, " ")
}

func (r result) String() string {
	if r.err != nil {
		return fmt.Sprintf("error %v after %v", r.err, r.took)
	}
	return fmt.Sprintf("%d after %v: %s", r.status, r.took.Round(time.Millisecond), truncate(string(r.body), 300))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (c *client) do(method, path, body string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return c.doCtx(ctx, method, path, body)
}

func (c *client) doCtx(ctx context.Context, method, path, body string) result {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("OData-Version", "4.0")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.closeEveryT {
		req.Close = true
	}
	switch {
	case c.token != "":
		req.Header.Set("X-Auth-Token", c.token)
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return result{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start), err: err}
}

func (c *client) get(t *testing.T, path string) map[string]any {
	t.Helper()
	r := c.do(http.MethodGet, path, "")
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET %s: %v", path, r)
	}
	return r.json()
}

// must runs a request and fails the test unless the status is want.
func (c *client) must(t *testing.T, want int, method, path, body string) result {
	t.Helper()
	r := c.do(method, path, body)
	if r.err != nil || r.status != want {
		t.Fatalf("%s %s %s: want %d, got %v", method, path, body, want, r)
	}
	return r
}

// login opens a session and returns its token and URI.
func (c *client) login(t *testing.T) (string, string) {
	t.Helper()
	anon := *c
	anon.user, anon.token = "", ""
	r := anon.must(t, http.StatusCreated, http.MethodPost, "/redfish/v1/SessionService/Sessions",
		fmt.Sprintf(`{"UserName":%q,"Password":%q}`, c.user, c.pass))
	return r.header.Get("X-Auth-Token"), r.header.Get("Location")
}

func sysPath(id string) string   { return "/redfish/v1/Systems/" + id }
func resetPath(id string) string { return sysPath(id) + "/Actions/ComputerSystem.Reset" }
func mediaPath(id string) string { return sysPath(id) + "/VirtualMedia/Cd" }
func insertPath(id string) string {
	return mediaPath(id) + "/Actions/VirtualMedia.InsertMedia"
}
func ejectPath(id string) string { return mediaPath(id) + "/Actions/VirtualMedia.EjectMedia" }

func bootBody(target, enabled string) string {
	return fmt.Sprintf(`{"Boot":{"BootSourceOverrideTarget":%q,"BootSourceOverrideEnabled":%q}}`, target, enabled)
}

// eventually polls cond every 100 ms until it holds or the time is up.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// eventuallyf is eventually with the last observation in the failure message.
func eventuallyf(t *testing.T, within time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s; last: %s", within, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// record logs a scenario's figures and, when $KRF_RELIABILITY_OUT names a directory, writes
// them there as <name>.json for RELIABILITY.md.
func record(t *testing.T, name string, figures map[string]any) {
	t.Helper()
	b, _ := json.MarshalIndent(figures, "", "  ")
	t.Logf("%s figures:\n%s", name, b)
	if dir := os.Getenv("KRF_RELIABILITY_OUT"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
		}
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
