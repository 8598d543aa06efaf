package main

import (
	"context"
	"os"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseName is the coordination Lease the replicas elect a leader with.
const leaseName = "kubevirt-redfish-leader"

// runLeaderElected runs background loops (boot-once restore) only on the elected leader, so
// that several replicas do not repeat each other's writes. Every replica serves requests.
// It returns when ctx ends.
func runLeaderElected(ctx context.Context, rc *rest.Config, namespace string, log *zap.Logger, run func(context.Context)) error {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// The hostname is the pod's name in a Deployment, but replicas can share one (hostNetwork,
	// two processes on one machine), and two replicas with one identity would both believe they
	// hold the Lease: a random suffix keeps every process distinct, as controller-runtime does.
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading: running background loops", zap.String("identity", id))
				run(ctx)
			},
			OnStoppedLeading: func() { log.Info("no longer leading", zap.String("identity", id)) },
		},
	}
	// RunOrDie returns when the Lease is lost, as when the apiserver is unreachable for longer
	// than the renew deadline: campaign again, or no replica would run the loops after an outage.
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, cfg)
		if ctx.Err() == nil {
			log.Warn("lost the leader Lease; campaigning again", zap.String("identity", id))
			select {
			case <-ctx.Done():
			case <-time.After(cfg.RetryPeriod):
			}
		}
	}
	return nil
}

// podNamespace is where the Lease lives: the namespace the server runs in.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return string(b)
	}
	return "kubevirt-redfish"
}
