package driver

// CreateSnapshot, DeleteSnapshot and ListSnapshots. A snapshot is a full copy of its
// source volume's bytes in <data-root>/snapshots/<id>, cut while the controller holds its
// mutex (so the source cannot be deleted midway; a pod writing meanwhile gets a
// crash-consistent copy at best, as with any snapshot taken without freezing the
// filesystem). It is ready to use as soon as CreateSnapshot answers, and it outlives its
// source: a restore needs only the copy and the source's mode and placement, kept here.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ErrUnreachable marks a volume whose bytes live where this controller cannot read or
// write them: a node-local (or an unconstrained zonal) volume's directory is on a node,
// and only `all` mode shares the node's --data-root.
var ErrUnreachable = errors.New("bytes not reachable from this controller")

// dataDir is where the volume's bytes are, as this controller sees them: "" (and no
// error) without --data-root, where no volume has bytes (KWOK backend). In `all` mode the
// node's directory is the one pods write to (its zone/ is no bind mount of the zone's
// directory there, as it is on kind), so it comes first.
func (c *Controller) dataDir(v *Volume) (string, error) {
	switch {
	case c.cfg.DataRoot == "":
		return "", nil
	case c.cfg.NodeDataRoot != "" && v.Mode == ModeNode:
		return filepath.Join(c.cfg.NodeDataRoot, "local", v.ID), nil
	case c.cfg.NodeDataRoot != "":
		return filepath.Join(c.cfg.NodeDataRoot, "zone", v.ID), nil
	case v.Dir != "":
		return v.Dir, nil
	}
	return "", fmt.Errorf("%w: volume %s is %s=%s in zone %q on node %q, so its directory is on a node, which only `pvchaos-csi all` shares",
		ErrUnreachable, v.ID, ParamTopology, v.Mode, v.Zone, v.Node)
}

var errNoSnapshots = status.Error(codes.Unimplemented, "snapshots are off (--snapshots=false)")

func (c *Controller) snapshotDir(id string) string {
	return filepath.Join(c.cfg.DataRoot, "snapshots", id)
}

func newSnapshotID() string { return "pvchaos-snap-" + strings.TrimPrefix(newVolumeID(), "pvchaos-") }

// CreateSnapshot copies the source volume's bytes. Idempotent by name: the same name
// and source answer the existing snapshot, another source is ALREADY_EXISTS.
func (c *Controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if c.cfg.NoSnapshots {
		return nil, errNoSnapshots
	}
	name, source := req.GetName(), req.GetSourceVolumeId()
	if err := checkSnapshotRequest(req); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.st.SnapshotByName(name); s != nil {
		if s.SourceVolumeID != source {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists as %s of volume %s, requested of volume %s",
				name, s.ID, s.SourceVolumeID, source)
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(s)}, nil
	}
	v := c.st.Volumes[source]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "snapshot %q: source volume %s does not exist", name, source)
	}
	from, err := c.dataDir(v)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "snapshot %q: %v", name, err)
	}
	s := &Snapshot{
		ID: newSnapshotID(), Name: name, SourceVolumeID: v.ID, SizeBytes: v.CapacityBytes, Mode: v.Mode, Zone: v.Zone,
		Node: v.Node, Parameters: req.GetParameters(), Created: time.Now().UTC().Truncate(time.Millisecond),
	}
	if from != "" {
		s.Dir = c.snapshotDir(s.ID)
		if err := os.MkdirAll(filepath.Dir(s.Dir), 0o755); err != nil {
			return nil, status.Errorf(codes.Internal, "snapshot %q: %v", name, err)
		}
		if err := CopyTree(from, s.Dir); err != nil {
			_ = os.RemoveAll(s.Dir)
			return nil, status.Errorf(codes.Internal, "snapshot %q of volume %s: %v", name, v.ID, err)
		}
	}
	c.st.Snapshots[s.ID] = s
	if err := c.save(); err != nil {
		delete(c.st.Snapshots, s.ID)
		if s.Dir != "" {
			_ = os.RemoveAll(s.Dir)
		}
		return nil, status.Errorf(codes.Internal, "snapshot %q: %v", name, err)
	}
	c.log.Eventf("created snapshot %s name=%q of volume %s (%s) bytes=%d", s.ID, name, v.ID, from, s.SizeBytes)
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(s)}, nil
}

// checkSnapshotRequest: INVALID_ARGUMENT for a request without name or source, or with
// a pvchaos.dev/ parameter (a snapshot class takes none); the controller's and a node's
// CreateSnapshot alike.
func checkSnapshotRequest(req *csi.CreateSnapshotRequest) error {
	name := req.GetName()
	switch {
	case name == "":
		return status.Error(codes.InvalidArgument, "name missing")
	case req.GetSourceVolumeId() == "":
		return status.Errorf(codes.InvalidArgument, "snapshot %q: source_volume_id missing", name)
	}
	for _, key := range sortedKeys(req.GetParameters()) {
		if strings.HasPrefix(key, ParamPrefix) {
			return status.Errorf(codes.InvalidArgument, "snapshot %q: unknown parameter %q (a snapshot class takes no %s keys)", name, key, ParamPrefix)
		}
	}
	return nil
}

// DeleteSnapshot is idempotent: an unknown id is OK. Volumes restored from the snapshot
// are copies and stay.
func (c *Controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if c.cfg.NoSnapshots {
		return nil, errNoSnapshots
	}
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id missing")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st.Snapshots[id]
	if s == nil {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	delete(c.st.Snapshots, id)
	if err := c.save(); err != nil {
		c.st.Snapshots[id] = s
		return nil, status.Errorf(codes.Internal, "snapshot %s: %v", id, err)
	}
	if s.Dir != "" {
		if err := os.RemoveAll(s.Dir); err != nil {
			c.log.Eventf("snapshot %s deleted, but its directory %s stays: %v", id, s.Dir, err)
		}
	}
	c.log.Eventf("deleted snapshot %s name=%q", id, s.Name)
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots pages through the snapshots in id order (pagination.go), filtered by
// snapshot_id and source_volume_id when given: an unknown one is an empty list, not an
// error (the spec's "no snapshot matches").
func (c *Controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if c.cfg.NoSnapshots {
		return nil, errNoSnapshots
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	matching := maps.Clone(c.st.Snapshots)
	maps.DeleteFunc(matching, func(id string, s *Snapshot) bool {
		return (req.GetSnapshotId() != "" && id != req.GetSnapshotId()) ||
			(req.GetSourceVolumeId() != "" && s.SourceVolumeID != req.GetSourceVolumeId())
	})
	ids, next, err := pageStatus(sortedKeys(matching), req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	out := &csi.ListSnapshotsResponse{NextToken: next}
	for _, id := range ids {
		out.Entries = append(out.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(matching[id])})
	}
	return out, nil
}

// csiSnapshot is the CSI view of a snapshot: ready as soon as it exists (the copy is done).
func csiSnapshot(s *Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId: s.ID, SourceVolumeId: s.SourceVolumeID, SizeBytes: s.SizeBytes,
		CreationTime: timestamppb.New(s.Created), ReadyToUse: true,
	}
}
