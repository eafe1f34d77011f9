package driver

// The controller service: its configuration, its one mutex around the state, and the
// capabilities it advertises (only what it implements).

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// KnownNode is a node the controller knows for certain: in `all` mode, the node service
// on the same endpoint. With known nodes, publishing to any other node id is NOT_FOUND
// (the spec's "Node does not exist"); a standalone controller cannot tell which nodes
// exist (the external-attacher only publishes to nodes whose CSINode lists the driver),
// so it accepts every node id.
type KnownNode struct {
	ID         string
	Hostname   string
	Zone       string
	MaxVolumes int64
}

// ControllerConfig is the controller's command line.
type ControllerConfig struct {
	StateFile  string
	DataRoot   string // "": no directories (KWOK backend)
	ControlDir string // "": no capacity limits
	Nodes      []KnownNode
	// NodeDataRoot is the node service's --data-root when it shares this process (`all`):
	// then DeleteVolume also removes the node's backing directory, which no other call
	// would (a standalone controller cannot reach node-local directories).
	NodeDataRoot string
	// FaultMisplace is a bug on purpose, for the harness's self-verification (a canary
	// must catch it): zonal volumes go to an allowed zone other than the selected node's.
	FaultMisplace bool
	// NodeKey is the driver's own per-node topology key on the wire ("": HostnameKey).
	NodeKey string
	// FaultNeverAttach: ControllerPublishVolume never answers (it waits for the caller's
	// deadline), as a broken storage backend whose attach hangs (examples/vendor-never-attaches).
	FaultNeverAttach bool
	// FaultAttachLimit > 0: ControllerPublishVolume refuses a node's attachment beyond
	// this many with RESOURCE_EXHAUSTED, whatever the node service reports as
	// max_volumes_per_node (examples/vendor-unenforced-limit).
	FaultAttachLimit int
	// NoSnapshots: neither advertise nor serve snapshots and clones (--snapshots=false), as
	// a driver without them: the snapshot RPCs are UNIMPLEMENTED, a content source is
	// INVALID_ARGUMENT (the spec's "Source ... not supported").
	NoSnapshots bool
}

// Controller implements csi.ControllerServer.
type Controller struct {
	csi.UnimplementedControllerServer
	cfg   ControllerConfig
	mu    sync.Mutex // guards st and the state file
	st    *State
	log   *Logger
	exit  func(code int) // os.Exit; a test replaces it
	sleep func(ctx context.Context, d time.Duration)
}

// NewController loads the state file and returns the service.
func NewController(cfg ControllerConfig, log *Logger) (*Controller, error) {
	st, err := LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	for _, n := range cfg.Nodes {
		if n.Hostname != "" && n.Zone != "" {
			st.NodeZones[n.Hostname] = n.Zone
		}
	}
	log.Eventf("controller: %d volumes, %d snapshots loaded from %s", len(st.Volumes), len(st.Snapshots), cfg.StateFile)
	return &Controller{cfg: cfg, st: st, log: log, exit: os.Exit, sleep: sleepCtx}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// save persists the state; the caller holds mu.
func (c *Controller) save() error {
	if err := c.st.Save(c.cfg.StateFile); err != nil {
		return fmt.Errorf("saving state file %s: %v", c.cfg.StateFile, err)
	}
	return nil
}

func (c *Controller) knownNode(id string) (KnownNode, bool) {
	for _, n := range c.cfg.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return KnownNode{}, false
}

var controllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
}

var snapshotCaps = map[csi.ControllerServiceCapability_RPC_Type]bool{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT: true,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS:         true,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME:           true,
}

// ControllerGetCapabilities advertises what this file's siblings implement: snapshots and
// clones (controller_snapshot.go, controller_source.go), expansion and modification
// (controller_expand.go), no GetSnapshot.
func (c *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	out := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range controllerCaps {
		if c.cfg.NoSnapshots && snapshotCaps[t] {
			continue
		}
		out.Capabilities = append(out.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return out, nil
}
