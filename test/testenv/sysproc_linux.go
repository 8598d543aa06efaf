package testenv

import "syscall"

// sysProcAttr makes the kernel SIGKILL the child when the test process dies
// (even by SIGKILL or a `go test -timeout` panic), so no stray etcd or
// kube-apiserver survives. Caveat of Pdeathsig: it fires when the OS *thread*
// that started the child exits, which the Go runtime only does for goroutines
// that exit while locked with runtime.LockOSThread; tests don't do that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
