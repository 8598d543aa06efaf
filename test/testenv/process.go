package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a child process whose output goes to a log file: etcd and kube-apiserver here,
// and the kubevirt-redfish binary that the binary and reliability tests and the benchmark
// harness run.
type Process struct {
	Cmd *exec.Cmd
	// Log is the path of the log file.
	Log string

	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, valid after done is closed
	exitAt time.Time     // when Wait returned, valid after done is closed
}

// StartProcess starts cmd with its standard output and error, unless cmd already sends them
// elsewhere, appended to the file logPath (created if missing), so that a process restarted
// on the same log keeps what its predecessor wrote. On Linux the child is SIGKILLed when the
// test process dies.
func StartProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logFile
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.exitAt = time.Now()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is Wait's result: valid once Done is closed.
func (p *Process) Err() error { return p.err }

// ExitedAt is when the process exited: valid once Done is closed.
func (p *Process) ExitedAt() time.Time { return p.exitAt }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit, sending SIGKILL when the process is still
// running after grace. Safe to call on nil and more than once.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SyncBuffer is a bytes.Buffer safe for concurrent use, to collect what a child process or an
// in-process server writes while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
