// Command pvchaos-csi is pvchaos's own small CSI driver: zonal and node-local volumes with
// capacity per zone, attachments recorded in a state file, bind mounts on nodes, a
// failure knob in class parameters, and a calls log the harness attaches to reports.
// Subcommands: controller, node, all (both services on one endpoint), version, info (a
// client: asks a plugin's socket GetPluginInfo and prints one JSON line; info.go), proxy
// (a fault proxy in front of any CSI driver's socket; proxy/, proxy_cmd.go), and
// registrar (node-driver-registrar's job as a container of its own; registrar.go), and
// release-loops (the loop devices of a node about to be deleted, detached).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"pvchaos.dev/csidriver/driver"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	switch cmd := os.Args[1]; cmd {
	case "version", "--version", "-version":
		fmt.Println("pvchaos-csi", driver.Version, "CSI spec 1.14.0")
	case "controller", "node", "all":
		opts, err := parseFlags(cmd, os.Args[2:])
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(usage)
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "pvchaos-csi %s: %v\n", cmd, err)
			os.Exit(2)
		}
		os.Exit(run(opts))
	case "info":
		os.Exit(infoMain(os.Args[2:]))
	case "proxy":
		os.Exit(proxyMain(os.Args[2:]))
	case "latency":
		os.Exit(latencyMain(os.Args[2:]))
	case "registrar":
		os.Exit(registrarMain(os.Args[2:]))
	case "release-loops":
		os.Exit(releaseLoopsMain(os.Args[2:]))
	case "help", "-h", "--help":
		fmt.Println(usage)
	default:
		fmt.Fprintf(os.Stderr, "pvchaos-csi: unknown subcommand %q\n%s\n", cmd, usage)
		os.Exit(2)
	}
}

const usage = `usage:
  pvchaos-csi controller --endpoint unix:///path/controller.sock --driver-name NAME --state-file FILE --calls-log FILE [--data-root DIR] [--control-dir DIR]
        [--node-topology-key KEY] [--fault-never-attach] [--fault-attach-limit N]
  pvchaos-csi node --endpoint unix:///path/csi.sock --driver-name NAME --node-id NODE --zone ZONE --hostname HOST --max-volumes-per-node N --data-root DIR --calls-log FILE [--registration-dir DIR] [--kubelet-endpoint unix:///path/proxy.sock]
        [--topology-from-node-labels KEY,...] [--node-topology-key KEY]
  pvchaos-csi all  (the union of both flag sets; controller and node services on one endpoint)
  pvchaos-csi info --endpoint unix:///path/csi.sock [--timeout 10s]   (GetPluginInfo, plugin, node and controller capabilities, NodeGetInfo as one JSON line)
  pvchaos-csi proxy --listen unix:///path/proxy.sock --target unix:///path/driver.sock [--rules FILE] [--log FILE]
      (forwards every call unchanged unless a rule in FILE, re-read when it changes, matches; docs/csi-fault-proxy.md)
  pvchaos-csi latency --endpoint unix:///path/csi.sock [--calls 2000]   (GetPluginInfo latency, median and p99: bench/csi_proxy.py)
  pvchaos-csi registrar --csi-address /csi/csi.sock --kubelet-registration-path /var/lib/kubelet/plugins/NAME/csi.sock [--plugin-registration-path /registration]
  pvchaos-csi release-loops DIR...   (detaches the loop devices over files below each DIR, e.g. before a node is deleted)
  pvchaos-csi version`

// releaseLoopsMain detaches the loop devices over files below the directories named.
func releaseLoopsMain(dirs []string) int {
	if len(dirs) == 0 {
		fmt.Fprintln(os.Stderr, "pvchaos-csi release-loops: name one directory at least")
		return 2
	}
	released, err := driver.ReleaseLoops(dirs...)
	for _, r := range released {
		fmt.Println("detached", r)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi release-loops: %v\n", err)
		return 1
	}
	return 0
}
