package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

// proc is a child process the harness measures through /proc.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startProc(logPath string, stdout *lockedWriter, env []string, name string, args ...string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logFile
	cmd.Stdout = logFile
	if stdout != nil {
		cmd.Stdout = stdout
	}
	// Children die with the harness (Linux), even on a crash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 10s.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// usage is a process's CPU time and memory from /proc.
type usage struct {
	CPU   time.Duration // user + system
	RSS   int64         // bytes, now
	HWM   int64         // bytes, peak RSS so far
	Taken time.Time
}

// clockTicks is USER_HZ, 100 on every Linux the harness runs on.
const clockTicks = 100

func readUsage(pid int) (usage, error) {
	u := usage{Taken: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name (field 2) may hold spaces; fields are counted after its ')'.
	rest := stat[bytes.LastIndexByte(stat, ')')+2:]
	fields := strings.Fields(string(rest))
	if len(fields) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(fields[12], 10, 64) // field 15
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.HWM = kb << 10
		}
	}
	return u, nil
}

// lockedWriter collects a child's stdout.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// ---- the kubevirt-redfish server ----

const (
	benchUser     = "admin"
	benchPassword = "bench-password"
	// serverNamespace is the server's own namespace: session Secrets live there.
	serverNamespace = "kubevirt-redfish"
)

// serverConfig writes the server's configuration: the fleet's namespaces allowlisted, one
// Administrator whose password is a bcrypt hash of cost 10 (the default), so that a Basic
// credential the cache did not remember would cost ~50 ms of CPU, and room for the sessions
// the login benchmark opens.
func serverConfig(dir, listen string, namespaces []string) (string, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(benchPassword), 10)
	if err != nil {
		return "", err
	}
	f := config.File{
		Listen:   listen,
		LogLevel: "info",
		TLS:      config.TLSFile{InsecureHTTP: true},
		Users: []config.UserFile{{Username: benchUser, Role: config.RoleAdministrator,
			PasswordHash: string(hash), Allow: []string{"*"}}},
		Sessions: config.SessionsFile{MaxPerUser: 1 << 20},
	}
	for _, ns := range namespaces {
		f.Allowlist = append(f.Allowlist, config.EntryFile{Namespace: ns})
	}
	if _, err := f.Compile(); err != nil {
		return "", err
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, b, 0o600)
}

// server is a running kubevirt-redfish.
type server struct {
	*proc
	addr string
	// ready is the time from exec to the first /readyz 200; synced is the informer sync time
	// the server logged ("informer caches synced").
	ready, synced time.Duration
}

// startServer runs the binary against the kubeconfig and waits for /readyz.
func startServer(ctx context.Context, bin, dir, kubeconfig string, namespaces, env []string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfgPath, err := serverConfig(dir, addr, namespaces)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	// --leader-elect=false: a single replica; without it the Lease renewals of the leader
	// would run in the background (they are not counted anyway: see counted).
	p, err := startProc(filepath.Join(dir, "server.log"), nil, env, bin, "--config", cfgPath, "--kubeconfig", kubeconfig,
		"--namespace", serverNamespace, "--leader-elect=false")
	if err != nil {
		return nil, err
	}
	s := &server{proc: p, addr: addr}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if p.exited() {
			return nil, fmt.Errorf("kubevirt-redfish exited during start-up; see %s:\n%s", p.log, tail(p.log, 20))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("kubevirt-redfish not ready after 5 minutes; see %s", p.log)
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.ready = time.Since(begin)
	s.synced, err = loggedSyncTime(p.log)
	if err != nil {
		return s, err
	}
	return s, nil
}

// loggedSyncTime finds the "informer caches synced" line of the server's JSON log and
// returns its "took" (seconds, zap's production encoding).
func loggedSyncTime(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Msg  string          `json:"msg"`
			Took json.RawMessage `json:"took"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "informer caches synced" {
			continue
		}
		var secs float64
		if err := json.Unmarshal(line.Took, &secs); err == nil {
			return time.Duration(secs * float64(time.Second)), nil
		}
		var s string
		if err := json.Unmarshal(line.Took, &s); err == nil {
			return time.ParseDuration(s)
		}
	}
	return 0, errors.New(`no "informer caches synced" line in the server log`)
}

// startCeiling runs this binary's ceiling subcommand serving body.
func startCeiling(dir string, body []byte) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	bodyPath := filepath.Join(dir, "ceiling-body.json")
	if err := os.WriteFile(bodyPath, body, 0o600); err != nil {
		return nil, err
	}
	out := &lockedWriter{}
	p, err := startProc(filepath.Join(dir, "ceiling.log"), out, nil, self, "ceiling", "-body", bodyPath,
		"-user", benchUser, "-password", benchPassword)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !p.exited() {
		if line, _, ok := strings.Cut(out.String(), "\n"); ok {
			return &server{proc: p, addr: strings.TrimSpace(line)}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("the ceiling server did not start; see %s", p.log)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
