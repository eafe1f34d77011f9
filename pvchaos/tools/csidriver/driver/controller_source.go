package driver

// CreateVolume's volume_content_source: a restore from a snapshot or a clone of a volume.
// The new volume keeps the source's topology, as a cloud disk made from a zonal snapshot
// or disk stays in that zone and a local volume's copy stays on its node: its placement is
// the source's, whatever the preferred segments say, and requisite segments that exclude
// it are the spec's "Unable to provision in accessible_topology", RESOURCE_EXHAUSTED.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// origin is a resolved content source: where its bytes are and what the new volume keeps.
type origin struct {
	kind     string // "snapshot" | "volume"
	id       string
	mode     string
	place    Placement
	size     int64
	dir      string // "": no bytes (no --data-root)
	snapshot string // Volume.SourceSnapshot
	volume   string // Volume.SourceVolume
}

func (o origin) String() string { return fmt.Sprintf("source %s %s", o.kind, o.id) }

// resolveSource finds the source (NOT_FOUND when it does not exist) and checks the new
// volume against it; the caller holds mu. It answers the origin and the new volume's size.
func (c *Controller) resolveSource(name string, src *csi.VolumeContentSource, p Params, required, limit int64,
	requisite []Segment) (origin, int64, error) {
	var o origin
	switch {
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		s := c.st.Snapshots[id]
		if s == nil {
			cut, err := c.nodeCutOrigin(name, id)
			if err != nil {
				return o, 0, err
			}
			o = cut
			break
		}
		o = origin{kind: "snapshot", id: id, mode: s.Mode, place: s.Placement(), size: s.SizeBytes, dir: s.Dir, snapshot: id}
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		v := c.st.Volumes[id]
		if v == nil {
			return o, 0, status.Errorf(codes.NotFound, "volume %q: source volume %q does not exist", name, id)
		}
		dir, err := c.dataDir(v)
		if err != nil {
			return o, 0, status.Errorf(codes.InvalidArgument, "volume %q: cannot clone volume %s: %v", name, id, err)
		}
		o = origin{kind: "volume", id: id, mode: v.Mode, place: v.Placement(), size: v.CapacityBytes, dir: dir, volume: id}
	default:
		return o, 0, status.Errorf(codes.InvalidArgument, "volume %q: volume_content_source names neither a snapshot nor a volume", name)
	}
	if o.mode != p.Mode {
		return o, 0, status.Errorf(codes.InvalidArgument, "volume %q: %v is %s=%s, the new volume's class asks for %s=%s (a copy keeps its source's topology mode)",
			name, o, ParamTopology, o.mode, ParamTopology, p.Mode)
	}
	size, err := sourceSize(o.size, required, limit)
	if err != nil {
		return o, 0, status.Errorf(codes.OutOfRange, "volume %q: %v: %v", name, o, err)
	}
	if !o.place.Satisfies(o.mode, requisite) {
		return o, 0, status.Errorf(codes.ResourceExhausted,
			"volume %q: %v is in zone %q node %q and a copy stays there, but the requisite topology %v excludes it",
			name, o, o.place.Zone, o.place.Node, requisite)
	}
	return o, size, nil
}

// nodeCutOrigin resolves a snapshot a node plugin cut (node_snapshot.go), known by its id
// alone: a node-local one is restored on its node (the bytes are copied there at the first
// stage, so `dir` stays empty here); a zonal one from the zone's shared directory, which
// this controller reaches under --data-root. Its size is unknown (the claim sizes it).
func (c *Controller) nodeCutOrigin(name, id string) (origin, error) {
	mode, where, ok := ParseNodeSnapshotID(id)
	if !ok {
		return origin{}, status.Errorf(codes.NotFound, "volume %q: source snapshot %q does not exist", name, id)
	}
	o := origin{kind: "snapshot", id: id, mode: mode, snapshot: id}
	if mode == ModeNode {
		o.place = Placement{Node: where}
		return o, nil
	}
	o.place = Placement{Zone: where}
	if c.cfg.DataRoot != "" {
		o.dir = filepath.Join(c.cfg.DataRoot, "zones", where, "snapshots", id)
		if st, err := os.Stat(o.dir); err != nil || !st.IsDir() {
			return origin{}, status.Errorf(codes.NotFound, "volume %q: source snapshot %q was cut in zone %s, but %s is not there",
				name, id, where, o.dir)
		}
	}
	return o, nil
}

// sourceSize is the new volume's size: at least the source's (required_bytes is a
// minimum, and none at all means the source's size); a limit below the source's size is
// OUT_OF_RANGE, the spec's "a volume smaller than the source".
func sourceSize(sourceBytes, required, limit int64) (int64, error) {
	if _, err := VolumeSize(required, limit); err != nil { // the range itself is invalid
		return 0, err
	}
	if limit > 0 && limit < sourceBytes {
		return 0, fmt.Errorf("%w: limit %d bytes is smaller than the source's %d bytes", ErrOutOfRange, limit, sourceBytes)
	}
	return VolumeSize(max(required, sourceBytes), limit)
}

// fill copies the origin's bytes into the new volume's directory; a missing source
// directory (never staged) makes an empty one. Without bytes on either side, nothing.
func (c *Controller) fill(v *Volume, o origin) error {
	if o.dir == "" {
		return nil
	}
	dst, err := c.dataDir(v)
	if err != nil || dst == "" {
		return fmt.Errorf("%v has bytes but the new volume's directory is unknown: %v", o, err)
	}
	if err := os.Remove(dst); err != nil && !os.IsNotExist(err) { // CreateVolume's empty directory
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { // no node has staged a volume yet
		return err
	}
	return CopyTree(o.dir, dst)
}

// contentSource is the CSI view of where a volume came from (nil for a new empty volume).
func contentSource(v *Volume) *csi.VolumeContentSource {
	switch {
	case v.SourceSnapshot != "":
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshot}}}
	case v.SourceVolume != "":
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolume}}}
	}
	return nil
}
