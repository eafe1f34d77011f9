package main

// Wiring: services onto the endpoint (and the registration socket), then wait for a
// signal, a server error or a failed kubelet registration.

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"pvchaos.dev/csidriver/driver"
)

func run(o options) int {
	log, err := driver.NewLogger(o.mode, o.callsLog)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi %s: %v\n", o.mode, err)
		return 1
	}
	defer log.Close()
	fail := func(format string, args ...any) int {
		log.Eventf("fatal: "+format, args...)
		return 1
	}
	sockPath, err := driver.SocketPath(o.endpoint)
	if err != nil {
		return fail("%v", err)
	}

	var labels map[string]string
	if o.node() && len(o.topologyLabels) > 0 {
		api, err := inClusterClient(serviceAccountDir)
		if err != nil {
			return fail("--topology-from-node-labels: %v", err)
		}
		if labels, err = topologyFromNode(context.Background(), api, o.nodeID, o.topologyLabels, 2*time.Minute, log.Eventf); err != nil {
			return fail("%v", err)
		}
		if z := labels[zoneKey]; z != "" {
			o.zone = z
		}
		log.Eventf("topology from node %s's labels: %v", o.nodeID, labels)
	}

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(log.Interceptor()))
	csi.RegisterIdentityServer(csiServer, &driver.Identity{Name: o.driverName, Controller: o.controller()})
	if o.controller() {
		cfg := driver.ControllerConfig{StateFile: o.stateFile, DataRoot: o.dataRoot, ControlDir: o.controlDir,
			FaultMisplace: o.faultMisplace, NodeKey: o.nodeKey, FaultNeverAttach: o.faultNever, FaultAttachLimit: o.faultAttachMax,
			NoSnapshots: !o.snapshots}
		if o.mode == "all" {
			cfg.Nodes = []driver.KnownNode{{ID: o.nodeID, Hostname: o.hostname, Zone: o.zone, MaxVolumes: o.maxVolumes}}
			cfg.NodeDataRoot = o.dataRoot
		}
		ctrl, err := driver.NewController(cfg, log)
		if err != nil {
			return fail("%v", err)
		}
		csi.RegisterControllerServer(csiServer, ctrl)
	}
	if o.node() {
		nodeCfg := driver.NodeConfig{
			NodeID: o.nodeID, Zone: o.zone, Hostname: o.hostname, MaxVolumes: o.maxVolumes, DataRoot: o.dataRoot,
			NoTopology: o.faultNoTopology, BlockFile: o.faultBlockFile, NoMount: o.faultNoMount,
			IgnoreMountGroup: o.faultMountGroup, NodeKey: o.nodeKey, Labels: labels,
		}
		csi.RegisterNodeServer(csiServer, driver.NewNode(nodeCfg, log))
		if o.nodeSnapshots { // only in `node` mode: `all` serves the controller's own snapshots
			csi.RegisterControllerServer(csiServer, driver.NewNodeSnapshots(nodeCfg, log))
		}
	}

	errs := make(chan error, 2)
	var served []driver.Served
	defer func() {
		for i := len(served) - 1; i >= 0; i-- { // registration first: the kubelet stops dialing us
			served[i].Stop(10 * time.Second)
		}
	}()
	serve := func(s *grpc.Server, path string) error {
		lis, err := driver.ListenUnix(path)
		if err != nil {
			return err
		}
		served = append(served, driver.Served{Server: s, Path: path})
		go func() { errs <- s.Serve(lis) }()
		return nil
	}
	if err := serve(csiServer, sockPath); err != nil {
		return fail("listening on %s: %v", sockPath, err)
	}
	log.Eventf("serving %s (driver %s, version %s) on %s", o.mode, o.driverName, driver.Version, sockPath)

	regFailed := make(chan string, 1)
	if o.registrationDir != "" {
		kubeletPath := sockPath
		if o.kubeletEndpoint != "" {
			if kubeletPath, err = driver.SocketPath(o.kubeletEndpoint); err != nil {
				return fail("%v", err)
			}
		}
		regServer := grpc.NewServer(grpc.UnaryInterceptor(log.Interceptor()))
		registerapi.RegisterRegistrationServer(regServer, &driver.Registrar{
			DriverName: o.driverName, Endpoint: kubeletPath, Log: log, Failed: regFailed,
		})
		regPath := filepath.Join(o.registrationDir, o.driverName+"-reg.sock")
		if err := serve(regServer, regPath); err != nil {
			return fail("listening on %s: %v", regPath, err)
		}
		log.Eventf("serving kubelet plugin registration on %s", regPath)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-sigs:
		log.Eventf("%v: stopping", sig)
		return 0
	case err := <-errs:
		return fail("gRPC server stopped: %v", err)
	case why := <-regFailed:
		return fail("kubelet registration failed: %s; exiting so that the supervisor restarts us", why)
	}
}
