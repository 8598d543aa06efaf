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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

const (
	serverNamespace = "kubevirt-redfish"
	adminUser       = "admin"
	password        = "password"
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

// cluster is a real apiserver with the demo VMs (tenant-a/cp-0..2, tenant-b/cp-0, all off) and
// the simulator, without any server: each test brings its own.
type cluster struct {
	env *testenv.Env
	dyn dynamic.Interface
	sim *sim.Simulator
	ctx context.Context
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := testenv.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The simulator redials its watches like the server does (cmd/kubevirt-redfish
	// retryWatches), so it follows an apiserver restart as quickly.
	rc := rest.CopyConfig(env.Config)
	rc.Wrap(func(next http.RoundTripper) http.RoundTripper { return watchRedialer{next} })
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{serverNamespace}, sim.DemoNamespaces...) {
		if err := env.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, vm := range sim.DemoVMs() {
		createVM(t, dyn, vm)
	}
	c := &cluster{env: env, dyn: dyn, ctx: ctx,
		sim: sim.New(dyn, sim.Options{BootDelay: 300 * time.Millisecond, ShutdownDelay: 300 * time.Millisecond})}
	if err := c.sim.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return c
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
	buildOnce.Do(func() {
		binPath = filepath.Join(workDir, "kubevirt-redfish")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/kubevirt-redfish")
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
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

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer writes a configuration (admin/password for every tenant), picks a port and
// starts the binary; it returns once /readyz answers 200.
func (c *cluster) startServer(t *testing.T, extraYAML string) *proc {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
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
		args: []string{"--config", cfgPath, "--kubeconfig", c.env.KubeconfigPath, "--namespace", serverNamespace}}
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (p *proc) url() string { return "http://" + p.addr }

// start runs the binary and waits until it is ready.
func (p *proc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(logf, "==== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(serverBinary(p.t), p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
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
		select {
		case <-done:
			p.t.Fatalf("the server exited during start:\n%s", p.logTail(40))
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the server did not become ready:\n%s", p.logTail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

// stop sends SIGTERM and waits (SIGKILL after 25 s).
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(25 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

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

// ---- images ----

// imageServer serves ISOs of size bytes on 127.0.0.1; delay slows each 64 KiB chunk.
type imageServer struct {
	*httptest.Server
	size  int
	delay atomic.Int64
}

func newImageServer(t *testing.T, size int) *imageServer {
	s := &imageServer{size: size}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(s.size))
		if r.Method == http.MethodHead {
			return
		}
		chunk := make([]byte, 64<<10)
		for left := s.size; left > 0; left -= len(chunk) {
			if left < len(chunk) {
				chunk = chunk[:left]
			}
			if d := time.Duration(s.delay.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s
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

// watchRedialer is a copy of cmd/kubevirt-redfish's: a refused watch dials again every half
// second instead of failing into client-go's exponential backoff.
type watchRedialer struct{ next http.RoundTripper }

func (w watchRedialer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Query().Get("watch") != "true" {
		return w.next.RoundTrip(req)
	}
	for {
		resp, err := w.next.RoundTrip(req)
		if err == nil || !utilnet.IsConnectionRefused(err) {
			return resp, err
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
