// Package binary tests the real kubevirt-redfish binary the way an operator runs it: built with
// `go build`, started with --config, --kubeconfig, --namespace and --leader-elect against a real
// kube-apiserver and etcd (test/testenv) with the KubeVirt and CDI CRDs, the simulator playing
// virt-controller in the test process. It checks what a Deployment relies on: the probes,
// /metrics, the JSON logs, the leader Lease, and the exit on SIGTERM within the grace period.
package binary

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

const (
	// leaseName is the Lease of cmd/kubevirt-redfish/leader.go.
	leaseName = "kubevirt-redfish-leader"
	adminUser = "admin"
	// password is distinctive so that the log check can be sure it never appears.
	password = "binary-test-Pa55word"
	// shutdownGrace is cmd/kubevirt-redfish's shutdownGrace, the bound of a SIGTERM exit.
	shutdownGrace = 20 * time.Second
	// version is stamped into the test binary, as the Dockerfile does.
	version = "v0.0.0-binary-test"
)

var (
	workDir string // the binary and scratch files of this test process
	binPath string
)

// TestMain builds ./cmd/kubevirt-redfish once, with the version stamped by ldflags.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "krf-binary-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	binPath, err = stack.BuildServer(dir, "-X main.version="+version)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// ---- the cluster ----

// cluster is a real apiserver holding the demo VMs with the simulator (stack.Cluster).
type cluster struct {
	*stack.Cluster
	cs kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := stack.StartCluster(t, stack.ClusterOptions{})
	cs, err := kubernetes.NewForConfig(c.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{Cluster: c, cs: cs}
}

// lease returns the leader Lease, or nil when it does not exist.
func (c *cluster) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := c.cs.CoordinationV1().Leases(stack.Namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return l
}

// ---- the server binary ----

type serverOpts struct {
	name string
	// https serves the self-signed certificate the server generates (no tls.certFile);
	// otherwise tls.insecureHTTP.
	https bool
}

// server is one running kubevirt-redfish process.
type server struct {
	*testenv.Process
	t       *testing.T
	name    string
	addr    string
	scheme  string
	hc      *http.Client
	started time.Time
}

// startServer writes a configuration and starts the binary with --config, --kubeconfig,
// --namespace, --leader-elect and --log-level debug. It does not wait for readiness.
func (c *cluster) startServer(t *testing.T, o serverOpts) *server {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr := stack.FreeAddr(t)
	tlsYAML := "tls: {insecureHTTP: true}"
	scheme := "http"
	if o.https {
		tlsYAML, scheme = "tls: {selfSignedNames: [localhost]}", "https"
	}
	// The README's configuration, reduced to one tenant: tenant-b stays outside the allowlist.
	cfg := fmt.Sprintf(`listen: %s
%s
logLevel: info
allowlist:
  - {name: tenant-a, namespace: tenant-a}
users:
  - {username: %s, role: Administrator, passwordHash: '%s', allow: [tenant-a]}
  - {username: reader, role: ReadOnly, passwordHash: '%s', allow: ["*"]}
`, addr, tlsYAML, adminUser, hash, hash)
	dir := filepath.Join(workDir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+o.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, name: o.name, addr: addr, scheme: scheme,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}}
	s.started = time.Now()
	s.Process, err = testenv.StartProcess(exec.Command(binPath, "--config", cfgPath, "--kubeconfig", c.Env.KubeconfigPath,
		"--namespace", stack.Namespace, "--leader-elect=true", "--log-level", "debug"), filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.terminate()
		if t.Failed() {
			t.Logf("server %s log (tail):\n%s", s.name, s.Tail(60))
		}
	})
	return s
}

func (s *server) url(path string) string { return s.scheme + "://" + s.addr + path }

// terminate sends SIGTERM and waits, with SIGKILL after 25 s. Safe to call more than once.
func (s *server) terminate() { s.Stop(shutdownGrace + 5*time.Second) }

// trustServingCert fetches the self-signed certificate of an HTTPS server, checks that it
// verifies for 127.0.0.1 and localhost, and makes the client trust exactly it.
func (s *server) trustServingCert() *x509.Certificate {
	s.t.Helper()
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // fetching the cert to pin it
	if err != nil {
		s.t.Fatalf("TLS handshake with %s: %v", s.name, err)
	}
	state := conn.ConnectionState()
	conn.Close()
	leaf := state.PeerCertificates[0]
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			s.t.Errorf("the self-signed certificate does not verify for %s: %v", name, err)
		}
	}
	if state.Version < tls.VersionTLS12 {
		s.t.Errorf("TLS version %x, want 1.2 or later", state.Version)
	}
	s.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return leaf
}

// waitStatus polls path until it answers want, the process exits or timeout passes; it returns
// the time waited.
func (s *server) waitStatus(path string, want int, timeout time.Duration) time.Duration {
	s.t.Helper()
	begin := time.Now()
	last := "no answer"
	for {
		if code, body, err := s.get(path); err == nil {
			if code == want {
				return time.Since(begin)
			}
			last = fmt.Sprintf("%d %s", code, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if s.Exited() {
			s.t.Fatalf("server %s exited (%v) while waiting for %s to answer %d:\n%s", s.name, s.Err(), path, want, s.Tail(40))
		}
		if time.Since(begin) > timeout {
			s.t.Fatalf("server %s: %s did not answer %d within %v (last: %s)", s.name, path, want, timeout, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// get is an unauthenticated GET.
func (s *server) get(path string) (int, []byte, error) {
	resp, err := s.hc.Get(s.url(path))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// do sends a request with Basic credentials (none when user is "").
func (s *server) do(method, path, user, pass, body string) (int, http.Header, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url(path), rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// admin sends a request as the admin user and decodes a JSON answer.
func (s *server) admin(method, path, body string) (int, map[string]any) {
	s.t.Helper()
	code, _, b := s.do(method, path, adminUser, password, body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return code, m
}

func (s *server) powerState(id string) string {
	_, m := s.admin(http.MethodGet, "/redfish/v1/Systems/"+id, "")
	p, _ := m["PowerState"].(string)
	return p
}

func (s *server) waitPower(id, want string, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.powerState(id) != want {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: PowerState %q, want %q after %v", id, s.powerState(id), want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics returns the Prometheus text of /metrics.
func (s *server) metrics() string {
	s.t.Helper()
	code, body, err := s.get("/metrics")
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return string(body)
}

// logLine is one decoded JSON log line.
type logLine map[string]any

func (l logLine) str(k string) string { v, _ := l[k].(string); return v }

// logs decodes the log. Lines that are not JSON are returned apart.
func (s *server) logs() (lines []logLine, notJSON []string) {
	s.t.Helper()
	b, err := os.ReadFile(s.Log)
	if err != nil {
		s.t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			notJSON = append(notJSON, sc.Text())
			continue
		}
		lines = append(lines, l)
	}
	return lines, notJSON
}

// logsWith returns the decoded lines whose msg is msg.
func (s *server) logsWith(msg string) []logLine {
	lines, _ := s.logs()
	var out []logLine
	for _, l := range lines {
		if l.str("msg") == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitExit waits for the process to exit and returns its exit code.
func (s *server) waitExit(timeout time.Duration) (int, error) {
	select {
	case <-s.Done():
	case <-time.After(timeout):
		return -1, errors.New("still running")
	}
	var ee *exec.ExitError
	if errors.As(s.Err(), &ee) {
		return ee.ExitCode(), nil
	}
	if s.Err() != nil {
		return -1, s.Err()
	}
	return 0, nil
}

// eventually polls cond every 50 ms until it holds or timeout passes; it returns how long it
// took, and fails the test on timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(begin)
}

// ---- Prometheus text ----

// series is one sample line of the exposition format.
type series struct {
	name   string
	labels map[string]string
	value  string
}

// parseMetrics parses the samples of a Prometheus text exposition (enough for the label values
// client_golang writes: quoted, with \" \\ and \n escapes).
func parseMetrics(t *testing.T, text string) []series {
	t.Helper()
	var out []series
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := series{labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(rest, "{ "); i >= 0 && rest[i] == '{' {
			s.name, rest = rest[:i], rest[i+1:]
			for !strings.HasPrefix(rest, "}") {
				eq := strings.Index(rest, `="`)
				if eq < 0 {
					t.Fatalf("cannot parse metric line %q", line)
				}
				key := strings.TrimPrefix(rest[:eq], ",")
				rest = rest[eq+2:]
				var val strings.Builder
				for {
					if rest == "" {
						t.Fatalf("cannot parse metric line %q", line)
					}
					c := rest[0]
					rest = rest[1:]
					if c == '\\' && rest != "" {
						val.WriteByte(rest[0])
						rest = rest[1:]
						continue
					}
					if c == '"' {
						break
					}
					val.WriteByte(c)
				}
				s.labels[key] = val.String()
				rest = strings.TrimPrefix(rest, ",")
			}
			rest = strings.TrimSpace(rest[1:])
		} else {
			name, v, _ := strings.Cut(rest, " ")
			s.name, rest = name, v
		}
		s.value, _, _ = strings.Cut(rest, " ")
		out = append(out, s)
	}
	return out
}

// find returns the value of the sample name{labels} (labels matched exactly), or "".
func find(all []series, name string, labels map[string]string) string {
	for _, s := range all {
		if s.name != name || len(s.labels) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return s.value
		}
	}
	return ""
}

// ---- raw HTTP, for the in-flight request at SIGTERM ----

// slowRequest is a request whose body is still being sent.
type slowRequest struct {
	conn net.Conn
	rest []byte
}

// startSlowRequest sends the request line, the headers and the first half of the body, and
// waits until the server has read them: the request is in flight.
func (s *server) startSlowRequest(method, path, user, pass, body string) *slowRequest {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	req, _ := http.NewRequest(method, s.url(path), nil)
	req.SetBasicAuth(user, pass)
	half := len(body) / 2
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, s.addr, req.Header.Get("Authorization"), len(body), body[:half])
	if _, err := conn.Write([]byte(head)); err != nil {
		s.t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the server reads the headers: the connection is active
	return &slowRequest{conn: conn, rest: []byte(body[half:])}
}

// finish sends the rest of the body and reads the response.
func (r *slowRequest) finish() (*http.Response, []byte, error) {
	defer r.conn.Close()
	_ = r.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.conn.Write(r.rest); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(r.conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

var figuresMu sync.Mutex

// figure logs a measured figure in one greppable format.
func figure(t *testing.T, name string, d time.Duration) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	t.Logf("FIGURE %s: %v", name, d.Round(time.Millisecond))
}

func dialTimeout(addr string, d time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, d)
}
