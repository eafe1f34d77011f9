package main

// The command line. Flags are per subcommand; `all` takes the union. Others code against
// these names, so they only ever grow.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

type options struct {
	mode            string // controller | node | all
	endpoint        string
	driverName      string
	callsLog        string
	stateFile       string
	dataRoot        string
	controlDir      string
	nodeID          string
	zone            string
	hostname        string
	maxVolumes      int64
	registrationDir string
	kubeletEndpoint string // what the registrar tells the kubelet to dial (default: endpoint)
	faultMisplace   bool
	faultNoTopology bool
	faultBlockFile  bool
	faultNoMount    bool
	faultMountGroup bool
	nodeKey         string
	topologyLabels  []string
	faultNever      bool
	faultAttachMax  int
	snapshots       bool
	nodeSnapshots   bool
}

func (o options) controller() bool { return o.mode == "controller" || o.mode == "all" }
func (o options) node() bool       { return o.mode == "node" || o.mode == "all" }

func parseFlags(mode string, args []string) (options, error) {
	o := options{mode: mode}
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.endpoint, "endpoint", "", "unix:///path.sock to serve CSI on")
	fs.StringVar(&o.driverName, "driver-name", "csi.pvchaos.dev", "CSI driver name")
	fs.StringVar(&o.callsLog, "calls-log", "", "file to append one JSON line per RPC to")
	fs.StringVar(&o.dataRoot, "data-root", "", "controller: <dir>/zones/<zone>/<id> per zonal volume; node: backing dirs, bind mounts")
	if o.controller() {
		fs.StringVar(&o.stateFile, "state-file", "", "JSON state: volumes, attachments")
		fs.StringVar(&o.controlDir, "control-dir", "", "dir with capacity.json, read on every call")
		fs.BoolVar(&o.snapshots, "snapshots", true,
			"advertise and serve snapshots and clones (false: a driver without them, e.g. a package whose certification has no snapshot suite to run yet)")
		fs.BoolVar(&o.faultMisplace, "fault-misplace", false,
			"self-verification only: a driver bug on purpose, placing each zonal volume in an allowed zone other than the selected node's")
		fs.BoolVar(&o.faultNever, "fault-never-attach", false,
			"self-verification only: ControllerPublishVolume never answers (a hanging attach)")
		fs.IntVar(&o.faultAttachMax, "fault-attach-limit", 0,
			"self-verification only: ControllerPublishVolume refuses more than N volumes per node, whatever max_volumes_per_node says (0: no limit)")
	}
	if o.controller() || o.node() {
		fs.StringVar(&o.nodeKey, "node-topology-key", "kubernetes.io/hostname",
			"the key of the driver's per-node topology segment, e.g. vendor.example.com/node")
	}
	if o.node() {
		fs.StringVar(&o.nodeID, "node-id", "", "node id (NodeGetInfo)")
		fs.StringVar(&o.zone, "zone", "", "the node's topology.kubernetes.io/zone")
		fs.StringVar(&o.hostname, "hostname", "", "the node's kubernetes.io/hostname (default: node id)")
		fs.Int64Var(&o.maxVolumes, "max-volumes-per-node", 0, "max_volumes_per_node (0: no limit)")
		fs.BoolVar(&o.faultNoTopology, "fault-no-topology", false,
			"self-verification only: NodeGetInfo reports no accessible topology (a broken node plugin)")
		fs.BoolVar(&o.faultBlockFile, "fault-block-file", false,
			"self-verification only: NodePublishVolume of a block volume bind-mounts its backing file, not a loop device (a broken node plugin)")
		fs.BoolVar(&o.faultNoMount, "fault-no-mount", false,
			"self-verification only: NodeStageVolume and NodePublishVolume answer OK without looking at or mounting the volume; the pod gets an empty directory of its own, new at each publish (a node plugin that never serves the volume's data)")
		fs.BoolVar(&o.faultMountGroup, "fault-ignore-mount-group", false,
			"self-verification only: the node advertises VOLUME_MOUNT_GROUP (the kubelet then leaves fsGroup to the driver) and ignores the volume_mount_group it is given")
		fs.Func("topology-from-node-labels", "comma list of Node label keys to report as topology (read through the in-cluster API at start), e.g. topology.kubernetes.io/zone",
			func(v string) error {
				for _, k := range strings.Split(v, ",") {
					if k = strings.TrimSpace(k); k != "" {
						o.topologyLabels = append(o.topologyLabels, k)
					}
				}
				return nil
			})
	}
	if mode == "node" {
		fs.StringVar(&o.registrationDir, "registration-dir", "", "kubelet plugins_registry dir: serve <dir>/<driver>-reg.sock")
		fs.StringVar(&o.kubeletEndpoint, "kubelet-endpoint", "",
			"unix:///path.sock the kubelet is told to dial (a fault proxy in front of --endpoint; default: --endpoint)")
		fs.BoolVar(&o.nodeSnapshots, "node-snapshots", false,
			"serve CreateSnapshot and DeleteSnapshot on this node, for a csi-snapshotter run beside it with --node-deployment (upstream's distributed snapshotting): node-local snapshots stay on the node's disk")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	var missing []string
	for name, v := range map[string]string{"endpoint": o.endpoint, "driver-name": o.driverName} {
		if v == "" {
			missing = append(missing, "--"+name)
		}
	}
	if o.controller() && o.stateFile == "" {
		missing = append(missing, "--state-file")
	}
	if o.node() && o.nodeID == "" {
		missing = append(missing, "--node-id")
	}
	if len(missing) > 0 {
		return o, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if o.node() && o.hostname == "" {
		o.hostname = o.nodeID
	}
	if o.maxVolumes < 0 {
		return o, errors.New("--max-volumes-per-node must be >= 0")
	}
	if o.faultAttachMax < 0 {
		return o, errors.New("--fault-attach-limit must be >= 0")
	}
	if (o.controller() || o.node()) && o.nodeKey == "" {
		return o, errors.New("--node-topology-key must not be empty")
	}
	if o.zone != "" && contains(o.topologyLabels, zoneKey) {
		return o, fmt.Errorf("--zone and --topology-from-node-labels=%s both set the zone; use one", zoneKey)
	}
	for _, p := range []*string{&o.stateFile, &o.callsLog, &o.dataRoot, &o.controlDir, &o.registrationDir} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return o, err
			}
			*p = abs
		}
	}
	return o, nil
}

const zoneKey = "topology.kubernetes.io/zone"

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
