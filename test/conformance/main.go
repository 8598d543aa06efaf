// Command conformance-env runs the real-apiserver backend of hack/conformance.sh: a real etcd +
// kube-apiserver with the KubeVirt and CDI CRDs (test/testenv), the demo VMs (tenant-a/cp-0..2,
// tenant-b/cp-0, all off) and the simulator playing virt-controller, as test/stack sets them up.
// It does not run kubevirt-redfish: the script runs the real binary against the kubeconfig this
// program writes.
//
//	eval "$(hack/tools.sh env)"
//	go run ./test/conformance -ready /tmp/ready
//
// When the environment is up it writes the admin kubeconfig's path to the -ready file, then
// serves until SIGINT or SIGTERM (or until its parent process goes away), and stops etcd and
// kube-apiserver. Everything listens on 127.0.0.1 only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// serverNamespace is where kubevirt-redfish keeps sessions and its leader Lease
// (its --namespace); the script passes the same name.
const serverNamespace = "kubevirt-redfish"

func main() {
	ready := flag.String("ready", "", "file that receives the kubeconfig path once the environment is up (required)")
	bootDelay := flag.Duration("boot-delay", 2*time.Second, "simulated VM boot time (the demo's value)")
	shutdownDelay := flag.Duration("shutdown-delay", 2*time.Second, "simulated graceful shutdown time (the demo's value)")
	flag.Parse()
	if *ready == "" {
		fmt.Fprintln(os.Stderr, "conformance-env: -ready is required")
		os.Exit(2)
	}
	if err := run(*ready, *bootDelay, *shutdownDelay); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-env:", err)
		os.Exit(1)
	}
}

func run(ready string, bootDelay, shutdownDelay time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchParent(ctx, cancel)

	startCtx, startCancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := testenv.Start(startCtx)
	startCancel()
	if err != nil {
		return err
	}
	defer env.Stop()

	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, ns := range append([]string{serverNamespace}, sim.DemoNamespaces...) {
		if err := env.CreateNamespace(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	for _, vm := range sim.DemoVMs() {
		u, err := sim.ToUnstructured(vm)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating VM %s/%s: %w", vm.Namespace, vm.Name, err)
		}
	}
	if err := sim.New(dyn, sim.Options{BootDelay: bootDelay, ShutdownDelay: shutdownDelay}).Run(ctx); err != nil {
		return fmt.Errorf("simulator: %w", err)
	}

	// Write the ready file atomically: the script polls for it.
	tmp := filepath.Join(filepath.Dir(ready), "."+filepath.Base(ready)+".tmp")
	if err := os.WriteFile(tmp, []byte(env.KubeconfigPath+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, ready); err != nil {
		return err
	}
	log.Printf("conformance-env: ready; kubeconfig %s", env.KubeconfigPath)
	<-ctx.Done()
	log.Printf("conformance-env: stopping")
	return nil
}

// watchParent cancels when the process that started this one exits (the script was killed):
// etcd and kube-apiserver must not outlive it.
func watchParent(ctx context.Context, cancel context.CancelFunc) {
	parent := os.Getppid()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != parent {
				log.Printf("conformance-env: parent process %d is gone", parent)
				cancel()
				return
			}
		}
	}
}
