package driver

// Snapshots cut on the node, for upstream's distributed snapshotting: a csi-snapshotter
// run with --node-deployment beside each node plugin takes only the VolumeSnapshotContents
// the snapshot-controller (--enable-distributed-snapshotting) labels with its node, the
// first node that matches the source PV's nodeAffinity. The host-side controller cannot
// read a node-local volume's bytes, so this is how pvchaos-csi snapshots one:
//
//   - node-local: the copy stays on the node's disk, <data-root>/snapshots/<id>, and dies
//     with it; a volume restored from it is pinned to the same node and filled there at
//     its first NodeStageVolume (CtxNodeSnapshot), since only that node has the bytes;
//   - zonal (cut by some node of the zone): the copy goes to the zone's shared directory,
//     <data-root>/zone/snapshots/<id>, which the controller sees as
//     <its data-root>/zones/<zone>/snapshots/<id> and restores from on the host.
//
// The snapshot id says where the copy is, pvchaos-snap-<hash of the name>@node@<hostname>
// or ...@zone@<zone>: the controller restores from an id alone, and '@' is never part
// of a label value, so the id parses without doubt. The id is derived from the name, so a
// retried CreateSnapshot answers the same snapshot.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CtxNodeSnapshot (volume_context) names the node-local snapshot a volume is restored
// from: the node plugin copies it into the volume's directory when it first makes it.
const CtxNodeSnapshot = ParamPrefix + "node-snapshot"

const nodeSnapshotPrefix = "pvchaos-snap-"

// NodeSnapshotID is the id of the snapshot `name` whose copy is kept in `mode`'s place
// `where` (a hostname for ModeNode, a zone for ModeZone).
func NodeSnapshotID(name, mode, where string) string {
	sum := sha256.Sum256([]byte(name))
	return nodeSnapshotPrefix + hex.EncodeToString(sum[:8]) + "@" + mode + "@" + where
}

// ParseNodeSnapshotID answers where a snapshot cut on a node keeps its copy; ok is false
// for any other id (the controller's own snapshots have no '@').
func ParseNodeSnapshotID(id string) (mode, where string, ok bool) {
	parts := strings.Split(id, "@")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], nodeSnapshotPrefix) || parts[2] == "" ||
		(parts[1] != ModeNode && parts[1] != ModeZone) {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// nodeSnapshotRecord is what the node keeps beside a copy: enough to answer a retry.
type nodeSnapshotRecord struct {
	Name           string    `json:"name"`
	SourceVolumeID string    `json:"source_volume_id"`
	Created        time.Time `json:"created"`
}

// NodeSnapshots implements the snapshot calls of csi.ControllerServer on a node plugin's
// socket (--node-snapshots), for a csi-snapshotter run there with --node-deployment.
type NodeSnapshots struct {
	csi.UnimplementedControllerServer
	cfg NodeConfig
	log *Logger
	mu  sync.Mutex
}

func NewNodeSnapshots(cfg NodeConfig, log *Logger) *NodeSnapshots {
	return &NodeSnapshots{cfg: cfg, log: log}
}

// ControllerGetCapabilities: CREATE_DELETE_SNAPSHOT alone. Without LIST_SNAPSHOTS the
// sidecar takes CreateSnapshot's ready_to_use as final, which it is (the copy is done).
func (s *NodeSnapshots) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT}},
	}}}, nil
}

// copyDir is where this node keeps (or sees) the copy of a snapshot in `mode`.
func (s *NodeSnapshots) copyDir(mode, id string) string {
	if mode == ModeNode {
		return filepath.Join(s.cfg.DataRoot, "snapshots", id)
	}
	return filepath.Join(s.cfg.DataRoot, "zone", "snapshots", id)
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// CreateSnapshot copies the source's directory on this node: its node-local one, else
// its zone's. A volume with neither (never staged on a node of this zone) is NOT_FOUND.
func (s *NodeSnapshots) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, source := req.GetName(), req.GetSourceVolumeId()
	if err := checkSnapshotRequest(req); err != nil {
		return nil, err
	}
	if s.cfg.DataRoot == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "snapshot %q: node %s has no --data-root, so no bytes to copy", name, s.cfg.NodeID)
	}
	mode, where, from := ModeNode, s.cfg.Hostname, filepath.Join(s.cfg.DataRoot, "local", source)
	if !isDir(from) {
		mode, where, from = ModeZone, s.cfg.Zone, filepath.Join(s.cfg.DataRoot, "zone", source)
		if s.cfg.Zone == "" || !isDir(from) {
			return nil, status.Errorf(codes.NotFound, "snapshot %q: volume %s has no directory on node %s, neither node-local nor in zone %q's shared one (a volume never staged on this node has none)",
				name, source, s.cfg.NodeID, s.cfg.Zone)
		}
	}
	id := NodeSnapshotID(name, mode, where)
	dir := s.copyDir(mode, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, err := readNodeSnapshotRecord(dir); err == nil {
		if rec.SourceVolumeID != source {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists as %s of volume %s, requested of volume %s",
				name, id, rec.SourceVolumeID, source)
		}
		return &csi.CreateSnapshotResponse{Snapshot: nodeCSISnapshot(id, rec)}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "snapshot %q: %v", name, err)
	}
	rec := nodeSnapshotRecord{Name: name, SourceVolumeID: source, Created: time.Now().UTC().Truncate(time.Millisecond)}
	if err := s.cut(from, dir, rec); err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot %q of volume %s on node %s: %v", name, source, s.cfg.NodeID, err)
	}
	s.log.Eventf("created snapshot %s name=%q of volume %s (%s) on node %s", id, name, source, from, s.cfg.NodeID)
	return &csi.CreateSnapshotResponse{Snapshot: nodeCSISnapshot(id, rec)}, nil
}

// cut copies beside the final place and renames, then writes the record: a crash midway
// leaves no copy that a retry would take for a finished one.
func (s *NodeSnapshots) cut(from, dir string, rec nodeSnapshotRecord) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	partial := dir + ".partial"
	_ = os.RemoveAll(partial)
	if err := CopyTree(from, partial); err != nil {
		_ = os.RemoveAll(partial)
		return err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(partial, dir); err != nil {
		return err
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(dir+".json", body, 0o644)
}

func readNodeSnapshotRecord(dir string) (nodeSnapshotRecord, error) {
	var rec nodeSnapshotRecord
	body, err := os.ReadFile(dir + ".json")
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(body, &rec)
}

// nodeCSISnapshot: size unknown (0, the spec's "not set"): the node plugin does not know
// the source's capacity, so the provisioner sizes a restore by its claim alone.
func nodeCSISnapshot(id string, rec nodeSnapshotRecord) *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: id, SourceVolumeId: rec.SourceVolumeID,
		CreationTime: timestamppb.New(rec.Created), ReadyToUse: true}
}

// DeleteSnapshot removes the copy; an unknown or gone one is OK (idempotent). A
// node-local snapshot of another node is FAILED_PRECONDITION: only its node has it.
func (s *NodeSnapshots) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id missing")
	}
	mode, where, ok := ParseNodeSnapshotID(id)
	if !ok || s.cfg.DataRoot == "" {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if mode == ModeNode && where != s.cfg.Hostname {
		return nil, status.Errorf(codes.FailedPrecondition, "snapshot %s is kept on node %s, this is node %s", id, where, s.cfg.Hostname)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.copyDir(mode, id)
	if err := os.Remove(dir + ".json"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "snapshot %s: %v", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot %s: %v", id, err)
	}
	s.log.Eventf("deleted snapshot %s on node %s", id, s.cfg.NodeID)
	return &csi.DeleteSnapshotResponse{}, nil
}

// fillFromNodeSnapshot copies a node-local snapshot kept on this node into a restored
// volume's new directory (ensureBacking, the volume's first stage here).
func (n *Node) fillFromNodeSnapshot(dir string, vctx map[string]string) error {
	id := vctx[CtxNodeSnapshot]
	mode, where, ok := ParseNodeSnapshotID(id)
	if !ok || mode != ModeNode {
		return status.Errorf(codes.InvalidArgument, "%s %q names no node-local snapshot", CtxNodeSnapshot, id)
	}
	from := filepath.Join(n.cfg.DataRoot, "snapshots", id)
	if where != n.cfg.Hostname || !isDir(from) {
		return status.Errorf(codes.FailedPrecondition, "restored from snapshot %s, kept on node %s, which this node (%s) does not have",
			id, where, n.cfg.Hostname)
	}
	if err := CopyTree(from, dir); err != nil {
		_ = os.RemoveAll(dir)
		return status.Errorf(codes.Internal, "restoring snapshot %s on node %s: %v", id, n.cfg.NodeID, err)
	}
	n.log.Eventf("filled %s from snapshot %s", dir, id)
	return nil
}
