package driver

// The node service: stage = bind the volume's backing directory onto the staging path;
// publish = bind the staged path onto the pod's target path (an inline ephemeral volume:
// bind a directory made for it, ephemeral.go). Without --data-root the
// calls are only checked and recorded (the KWOK backend has no real nodes to mount on).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeConfig is the node's command line.
type NodeConfig struct {
	NodeID     string
	Zone       string
	Hostname   string
	MaxVolumes int64
	DataRoot   string // "": record calls only, no mounts
	// NoTopology: a broken node plugin on purpose (--fault-no-topology): NodeGetInfo
	// reports no accessible topology, so the kubelet writes no topology keys.
	NoTopology bool
	// NodeKey is the key of the per-node segment ("": HostnameKey), e.g. a vendor's own
	// vendor.example.com/node; the kubelet labels the Node with it.
	NodeKey string
	// Labels are further segment keys read from the Node's labels at start
	// (--topology-from-node-labels), e.g. the zone without a --zone per DaemonSet.
	Labels map[string]string
}

// Node implements csi.NodeServer.
type Node struct {
	csi.UnimplementedNodeServer
	cfg NodeConfig
	log *Logger
}

func NewNode(cfg NodeConfig, log *Logger) *Node { return &Node{cfg: cfg, log: log} }

func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	seg := map[string]string{HostnameKey: n.cfg.Hostname}
	if n.cfg.Zone != "" {
		seg[ZoneKey] = n.cfg.Zone
	}
	for k, v := range n.cfg.Labels {
		seg[k] = v
	}
	seg = ToWire(seg, n.cfg.NodeKey)
	if n.cfg.NoTopology {
		return &csi.NodeGetInfoResponse{NodeId: n.cfg.NodeID, MaxVolumesPerNode: n.cfg.MaxVolumes}, nil
	}
	return &csi.NodeGetInfoResponse{
		NodeId: n.cfg.NodeID, MaxVolumesPerNode: n.cfg.MaxVolumes,
		AccessibleTopology: &csi.Topology{Segments: seg},
	}, nil
}

// NodeGetCapabilities: staging only (no stats: kubelet would poll them every minute and
// drown the calls log; no expansion).
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}}}, nil
}

// backingDir is where the volume's data lives on this node: the zone's shared directory
// (kind mounts the host's <controller data-root>/zones/<zone> here) or a node-local one.
func (n *Node) backingDir(id string, vctx map[string]string) string {
	if vctx[CtxTopology] == ModeNode {
		return filepath.Join(n.cfg.DataRoot, "local", id)
	}
	return filepath.Join(n.cfg.DataRoot, "zone", id)
}

// blockFile is a block volume's backing file inside its directory: bind-mounting a file
// gives the pod a "device" path without loop devices.
func blockFile(dir string) string { return filepath.Join(dir, "block") }

// checkLocal refuses a node-local volume of another node: its data is not here, unless
// the operator moved it here (its directory exists on this node: move.go).
func (n *Node) checkLocal(id string, vctx map[string]string) error {
	if vctx[CtxTopology] == ModeNode && vctx[CtxNode] != "" && n.cfg.Hostname != "" && vctx[CtxNode] != n.cfg.Hostname {
		if n.cfg.DataRoot != "" {
			if st, err := os.Stat(n.backingDir(id, vctx)); err == nil && st.IsDir() {
				return nil
			}
		}
		return status.Errorf(codes.FailedPrecondition, "volume %s is local to node %s, this is node %s (and no copy was moved here)",
			id, vctx[CtxNode], n.cfg.Hostname)
	}
	return nil
}

// ensureBacking creates the backing directory (and, for block, the sparse backing file of
// the volume's size) when missing.
func (n *Node) ensureBacking(id string, vctx map[string]string, block bool) (string, error) {
	dir := n.backingDir(id, vctx)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	_ = os.Chmod(dir, 0o777)
	if !block {
		return dir, nil
	}
	file := blockFile(dir)
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if size, err := strconv.ParseInt(vctx[CtxCapacity], 10, 64); err == nil && size > 0 {
		if st, err := f.Stat(); err == nil && st.Size() < size {
			if err := f.Truncate(size); err != nil {
				return "", err
			}
		}
	}
	return file, nil
}

func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging, capability := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	case staging == "":
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: staging_target_path missing", id)
	case capability == nil:
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_capability missing", id)
	}
	if why := CheckCapability(capability, req.GetVolumeContext()[CtxTopology]); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %s", id, why)
	}
	if err := n.checkLocal(id, req.GetVolumeContext()); err != nil {
		return nil, err
	}
	if n.cfg.DataRoot == "" {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	block := capability.GetBlock() != nil
	source, err := n.ensureBacking(id, req.GetVolumeContext(), block)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: backing storage: %v", id, n.cfg.NodeID, err)
	}
	if block {
		return &csi.NodeStageVolumeResponse{}, nil // nothing to stage: publish binds the backing file
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	if mounted, err := IsMountPoint(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	} else if mounted {
		return &csi.NodeStageVolumeResponse{}, nil // staged already: idempotent
	}
	if err := BindMount(source, staging, false); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	n.log.Eventf("staged volume %s at %s (from %s)", id, staging, source)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *Node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	case staging == "":
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: staging_target_path missing", id)
	}
	if n.cfg.DataRoot == "" {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err := UnmountAll(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, staging, capability := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	case target == "":
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: target_path missing", id)
	case capability == nil:
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_capability missing", id)
	case IsEphemeral(req.GetVolumeContext()):
		return n.publishEphemeral(req) // inline: the kubelet stages nothing (ephemeral.go)
	case staging == "":
		// We advertise STAGE_UNSTAGE_VOLUME: the spec's "Staging target path not set". An
		// inline volume arrives here too when the CSIDriver lacks podInfoOnMount: the
		// kubelet then does not mark it csi.storage.k8s.io/ephemeral.
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s: staging_target_path missing though the node stages volumes "+
			"(an inline ephemeral volume needs podInfoOnMount: true in the CSIDriver, so the kubelet marks it %s)", id, CtxEphemeral)
	}
	if why := CheckCapability(capability, req.GetVolumeContext()[CtxTopology]); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %s", id, why)
	}
	if err := n.checkLocal(id, req.GetVolumeContext()); err != nil {
		return nil, err
	}
	if n.cfg.DataRoot == "" {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if mounted, err := IsMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	} else if mounted {
		return &csi.NodePublishVolumeResponse{}, nil // published already: idempotent
	}
	var source string
	var err error
	if capability.GetBlock() != nil {
		source, err = n.publishBlockSource(id, req.GetVolumeContext(), target)
	} else {
		source, err = n.publishMountSource(id, req.GetVolumeContext(), staging, target)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	if err := BindMount(source, target, req.GetReadonly()); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	n.log.Eventf("published volume %s at %s (from %s, readonly=%v)", id, target, source, req.GetReadonly())
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishMountSource is the staged directory (or, when the staging path is not mounted,
// the backing directory itself), with the target directory created.
func (n *Node) publishMountSource(id string, vctx map[string]string, staging, target string) (string, error) {
	source := staging
	if mounted, err := IsMountPoint(staging); err != nil {
		return "", err
	} else if !mounted {
		if source, err = n.ensureBacking(id, vctx, false); err != nil {
			return "", err
		}
	}
	return source, os.MkdirAll(target, 0o750)
}

// publishBlockSource is the backing file, with the target created as a file (the CO
// creates its parent directory only).
func (n *Node) publishBlockSource(id string, vctx map[string]string, target string) (string, error) {
	source, err := n.ensureBacking(id, vctx, true)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", err
	}
	f, err := os.OpenFile(target, os.O_CREATE, 0o660)
	if err != nil {
		return "", fmt.Errorf("creating block target file: %w", err)
	}
	return source, f.Close()
}

// NodeUnpublishVolume unmounts the target and removes it (the file or directory publish
// created), and an inline ephemeral volume's data with it, idempotently.
func (n *Node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	case target == "":
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: target_path missing", id)
	}
	if n.cfg.DataRoot == "" {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := UnmountAll(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: removing %s: %v", id, n.cfg.NodeID, target, err)
	}
	if err := n.removeEphemeral(id); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: removing the inline volume's data: %v", id, n.cfg.NodeID, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
