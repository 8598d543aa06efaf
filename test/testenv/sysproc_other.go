//go:build !linux

package testenv

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent (Pdeathsig);
// elsewhere a killed test process may leave etcd/kube-apiserver behind.
func sysProcAttr() *syscall.SysProcAttr { return nil }
