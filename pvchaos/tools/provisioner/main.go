// Command pvchaos-provisioner is the harness's test double of a topology-aware CSI
// driver. It runs two provisioners on sig-storage-lib-external-provisioner, the
// library real external provisioners use, so the provisioning protocol, retries and
// rescheduling on failure are upstream's, except the removal of selected-node
// after a failure (reschedule.go), and both fail on demand (knob.go):
//
//   - the zonal one writes PVs whose nodeAffinity is a topology.kubernetes.io/zone,
//     the zone of the selected node (WaitForFirstConsumer) or one allowed by the
//     class's allowedTopologies (Immediate);
//   - the local one writes `local` PVs pinned by kubernetes.io/hostname to the
//     selected node, like local-path provisioners.
//
// No storage exists behind the PVs on KWOK nodes, which never mount anything. With
// -hostpath-root (the kind backend) every PV is instead a hostPath directory that a
// real kubelet creates and mounts on the node the PV's affinity allows.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to the cluster's kubeconfig")
	zonalName := flag.String("zonal-name", "zonal.csi.pvchaos.dev", "provisioner name of zonal volumes")
	localName := flag.String("local-name", "local.csi.pvchaos.dev", "provisioner name of node-local volumes")
	flag.StringVar(&hostPathRoot, "hostpath-root", "", "make mountable hostPath PVs under this node directory (real kubelets)")
	reschedule := flag.String("reschedule", string(rescheduleGuarded),
		"who removes selected-node after a failure that asks for another node: guarded (ours), library (v13.1.0's, racy), off")
	klog.InitFlags(nil)
	flag.Parse()

	mode, err := parseRescheduleMode(*reschedule)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-provisioner: %v\n", err)
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-provisioner: kubeconfig %q: %v\n", *kubeconfig, err)
		os.Exit(2)
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-provisioner: client: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	options := []func(*controller.ProvisionController) error{
		controller.LeaderElection(false),
		controller.ResyncPeriod(15 * time.Second),
		controller.RetryIntervalMax(5 * time.Second),
		controller.Threadiness(4),
	}
	// Each provisioner fails on the class's pvchaos.dev/fail-* knob (knob.go), and a
	// failure that asks for another node is handled by `mode` (reschedule.go).
	wrap := func(p controller.Provisioner) controller.Provisioner {
		return &rescheduling{inner: newFailing(p, client), client: client, mode: mode}
	}
	zonal := controller.NewProvisionController(ctx, client, *zonalName, wrap(&zonalProvisioner{client: client}), options...)
	local := controller.NewProvisionController(ctx, client, *localName, wrap(&localProvisioner{client: client}), options...)
	go zonal.Run(ctx)
	go local.Run(ctx)
	klog.Infof("pvchaos-provisioner: serving %s and %s (reschedule: %s)", *zonalName, *localName, mode)
	<-ctx.Done()
}
