package driver

// The node service: stage = bind the volume's backing directory onto the staging path
// (a block volume: attach a loop device over its backing file, loop.go); publish = bind
// the staged path (the loop device) onto the pod's target path (an inline ephemeral
// volume: bind a directory made for it, ephemeral.go). Without --data-root the
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
	// NoMount: a broken node plugin on purpose (--fault-no-mount): stage and publish
	// answer OK without checking the volume is here, and publish binds a new empty
	// scratch directory (under <data-root>/scratch) instead of the volume, so the pod
	// never sees the volume's data and what it writes is gone at the next publish.
	NoMount bool
	// IgnoreMountGroup: a broken node plugin on purpose (--fault-ignore-mount-group): it
	// advertises VOLUME_MOUNT_GROUP, so the kubelet hands it the pod's fsGroup instead of
	// applying it, and then ignores the volume_mount_group.
	IgnoreMountGroup bool
	// NodeKey is the key of the per-node segment ("": HostnameKey), e.g. a vendor's own
	// vendor.example.com/node; the kubelet labels the Node with it.
	NodeKey string
	// Labels are further segment keys read from the Node's labels at start
	// (--topology-from-node-labels), e.g. the zone without a --zone per DaemonSet.
	Labels map[string]string
	// BlockFile: a broken node plugin on purpose (--fault-block-file): NodePublishVolume
	// of a block volume bind-mounts the backing file itself instead of its loop device,
	// so the pod's "device" is a regular file the container runtime refuses.
	BlockFile bool
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
	caps := []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}},
	}, {
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_EXPAND_VOLUME}},
	}}
	if n.cfg.IgnoreMountGroup {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// backingDir is where the volume's data lives on this node: the zone's shared directory
// (kind mounts the host's <controller data-root>/zones/<zone> here) or a node-local one.
func (n *Node) backingDir(id string, vctx map[string]string) string {
	if vctx[CtxTopology] == ModeNode {
		return filepath.Join(n.cfg.DataRoot, "local", id)
	}
	return filepath.Join(n.cfg.DataRoot, "zone", id)
}

// blockFile is a block volume's backing file inside its directory; a loop device over
// it is what the pod gets (loop.go).
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
// the volume's size) when missing. A directory that exists keeps its mode: it is the
// volume's root, whose group and setgid bit a kubelet's fsGroup walk set (and
// fsGroupChangePolicy OnRootMismatch reads), as a disk mounted on another node keeps its
// root's mode; resetting it at every stage made OnRootMismatch walk again on a new node.
func (n *Node) ensureBacking(id string, vctx map[string]string, block bool) (string, error) {
	dir := n.backingDir(id, vctx)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && vctx[CtxNodeSnapshot] != "" {
		if err := n.fillFromNodeSnapshot(dir, vctx); err != nil { // a restore of a snapshot kept here
			return "", err
		}
	} else if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		_ = os.Chmod(dir, 0o777) // pods of any uid write into a new volume; umask must not decide
	} else if err != nil {
		return "", err
	}
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
	if n.cfg.NoMount {
		n.log.Eventf("fault-no-mount: volume %s not staged (answered OK)", id)
		return &csi.NodeStageVolumeResponse{}, nil
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
		dev, err := AttachLoop(source)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s node %s: loop device over %s: %v", id, n.cfg.NodeID, source, err)
		}
		n.log.Eventf("staged block volume %s: %s over %s", id, dev, source)
		return &csi.NodeStageVolumeResponse{}, nil
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
	if err := n.detachBlock(id); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// detachBlock detaches the loop device of the volume's backing file, if it is a block
// volume with one here and no mount of that device is left (the request carries no
// capability or context, so both backing directories are looked at).
func (n *Node) detachBlock(id string) error {
	for _, mode := range []string{ModeZone, ModeNode} {
		file := blockFile(n.backingDir(id, map[string]string{CtxTopology: mode}))
		if _, err := os.Stat(file); err != nil {
			continue
		}
		dev, err := FindLoop(file)
		if err != nil || dev == "" {
			return err
		}
		if point, err := DeviceMountedAt(dev); err != nil {
			return err
		} else if point != "" {
			n.log.Eventf("unstaged block volume %s: %s kept, still mounted at %s", id, dev, point)
			return nil
		}
		if err := DetachLoop(dev); err != nil {
			return err
		}
		n.log.Eventf("unstaged block volume %s: %s detached from %s", id, dev, file)
	}
	return nil
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
	if n.cfg.NoMount {
		return n.publishScratch(id, target, capability.GetBlock() != nil)
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

// publishScratch is --fault-no-mount's publish: a new empty directory (or file, for
// block) under <data-root>/scratch bound onto the target, never the volume.
func (n *Node) publishScratch(id, target string, block bool) (*csi.NodePublishVolumeResponse, error) {
	if n.cfg.DataRoot == "" {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if mounted, err := IsMountPoint(target); err == nil && mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	root := filepath.Join(n.cfg.DataRoot, "scratch")
	if err := os.MkdirAll(root, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	scratch, err := os.MkdirTemp(root, id+"-")
	if err == nil {
		err = os.Chmod(scratch, 0o777)
	}
	source := scratch
	if err == nil && block {
		source = blockFile(scratch)
		var f *os.File
		if f, err = os.OpenFile(source, os.O_CREATE, 0o666); err == nil {
			err = f.Close()
		}
		if err == nil {
			err = os.MkdirAll(filepath.Dir(target), 0o750)
		}
		if err == nil {
			if f, err = os.OpenFile(target, os.O_CREATE, 0o660); err == nil {
				err = f.Close()
			}
		}
	} else if err == nil {
		err = os.MkdirAll(target, 0o750)
	}
	if err == nil {
		err = BindMount(source, target, false)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	n.log.Eventf("fault-no-mount: published an empty scratch directory %s at %s instead of volume %s", scratch, target, id)
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

// publishBlockSource is the loop device over the backing file (attached here when the
// volume was not staged on this node), with the target created as a file (the CO creates
// its parent directory only; a device node is bind-mounted onto a file).
func (n *Node) publishBlockSource(id string, vctx map[string]string, target string) (string, error) {
	file, err := n.ensureBacking(id, vctx, true)
	if err != nil {
		return "", err
	}
	source := file
	if !n.cfg.BlockFile {
		if source, err = AttachLoop(file); err != nil {
			return "", fmt.Errorf("loop device over %s: %w", file, err)
		}
		// the kubelet takes a loop device of its own over the published path (its fd
		// lock, `losetup -f`): the device it will be handed needs a node here too
		if err := SpareLoopNode(); err != nil {
			n.log.Eventf("volume %s: no node for a spare loop device: %v", id, err)
		}
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
