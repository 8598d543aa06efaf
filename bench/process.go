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
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// startProc starts a child the harness measures through /proc, its output in a fresh log at
// logPath (the output directory outlives runs, and loggedSyncTime reads the first sync line),
// stdout to stdout instead when that is not nil.
func startProc(logPath string, stdout *testenv.SyncBuffer, env []string, name string, args ...string) (*testenv.Process, error) {
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdout != nil {
		cmd.Stdout = stdout
	}
	return testenv.StartProcess(cmd, logPath)
}

// stopGrace bounds the wait after SIGTERM before a child is killed.
const stopGrace = 10 * time.Second

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
	*testenv.Process
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
	s := &server{Process: p, addr: addr}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if p.Exited() {
			return nil, fmt.Errorf("kubevirt-redfish exited during start-up; see %s:\n%s", p.Log, p.Tail(20))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop(stopGrace)
			return nil, fmt.Errorf("kubevirt-redfish not ready after 5 minutes; see %s", p.Log)
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
	s.synced, err = loggedSyncTime(p.Log)
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
	out := &testenv.SyncBuffer{}
	p, err := startProc(filepath.Join(dir, "ceiling.log"), out, nil, self, "ceiling", "-body", bodyPath,
		"-user", benchUser, "-password", benchPassword)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !p.Exited() {
		if line, _, ok := strings.Cut(out.String(), "\n"); ok {
			return &server{Process: p, addr: strings.TrimSpace(line)}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop(stopGrace)
	return nil, fmt.Errorf("the ceiling server did not start; see %s", p.Log)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
