package driver

// CreateVolume and DeleteVolume.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// segments reads request topology, the driver's own node key read as HostnameKey.
func segments(ts []*csi.Topology, nodeKey string) []Segment {
	out := make([]Segment, 0, len(ts))
	for _, t := range ts {
		out = append(out, FromWire(t.GetSegments(), nodeKey))
	}
	return out
}

// toTopology writes answer topology, HostnameKey written as the driver's own node key.
func toTopology(segs []Segment, nodeKey string) []*csi.Topology {
	var out []*csi.Topology
	for _, s := range segs {
		out = append(out, &csi.Topology{Segments: ToWire(s, nodeKey)})
	}
	return out
}

// CreateVolume validates the request, applies the knob, checks the zone's capacity and
// records the volume, with its content source's bytes when it has one. Idempotent by name.
func (c *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	params, err := ParseParams(req.GetParameters())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q: %v", name, err)
	}
	if why := CheckCapabilities(req.GetVolumeCapabilities(), params.Mode); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q: %s", name, why)
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	size, err := VolumeSize(required, limit)
	if err != nil {
		return nil, status.Errorf(codes.OutOfRange, "volume %q: %v", name, err)
	}
	requisite := segments(req.GetAccessibilityRequirements().GetRequisite(), c.cfg.NodeKey)
	preferred := segments(req.GetAccessibilityRequirements().GetPreferred(), c.cfg.NodeKey)
	if why := CheckMutable(req.GetMutableParameters()); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q: %s", name, why)
	}
	source := req.GetVolumeContentSource()
	if source != nil && c.cfg.NoSnapshots {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q: volume_content_source is not supported (--snapshots=false: no snapshots, no clones)", name)
	}
	var place Placement
	if source == nil { // a copy's placement is its source's (controller_source.go)
		place, err = ChoosePlacement(params.Mode, requisite, preferred)
		if c.cfg.FaultMisplace && err == nil {
			place = Misplace(params.Mode, place, requisite)
		}
		if errors.Is(err, ErrUnsatisfiable) {
			return nil, status.Errorf(codes.ResourceExhausted, "volume %q: %v", name, err)
		}
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume %q: %v", name, err)
		}
	}

	c.mu.Lock()
	locked := true
	defer func() {
		if locked {
			c.mu.Unlock()
		}
	}()
	c.learnZones(append(requisite, preferred...))

	if v := c.st.ByName(name); v != nil {
		if why := incompatible(v, params, required, limit, requisite, source); why != "" {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists as %s and is incompatible: %s", name, v.ID, why)
		}
		return &csi.CreateVolumeResponse{Volume: c.csiVolume(v)}, nil
	}
	var from origin
	if source != nil {
		if from, size, err = c.resolveSource(name, source, params, required, limit, requisite); err != nil {
			return nil, err
		}
		place = from.place
	}
	if place.Zone == "" && place.Node != "" {
		place.Zone = c.st.NodeZones[place.Node]
	}

	if plan := params.Plan; plan != nil {
		attempt, fail := c.knobDecision(name, plan, preferred)
		if err := c.save(); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %q: %v", name, err)
		}
		if fail {
			c.mu.Unlock() // nobody waits for our delay
			locked = false
			return nil, c.failOnPurpose(ctx, req, plan, attempt)
		}
	}

	capacities, err := ZoneCapacities(c.cfg.ControlDir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: control file: %v", name, err)
	}
	if free, limited := Remaining(capacities, place.Zone, c.st.UsedInZone(place.Zone)); limited && free < size {
		return nil, status.Errorf(codes.ResourceExhausted,
			"volume %q: zone %q has %d bytes free (capacity %d, provisioned %d), the volume needs %d",
			name, place.Zone, free, capacities[place.Zone], c.st.UsedInZone(place.Zone), size)
	}

	v := &Volume{
		ID: newVolumeID(), Name: name, CapacityBytes: size, Mode: params.Mode, Zone: place.Zone, Node: place.Node,
		Parameters: params.Stored, AccessModes: accessModeNames(req.GetVolumeCapabilities()),
		Created: time.Now().UTC().Truncate(time.Millisecond), SourceSnapshot: from.snapshot, SourceVolume: from.volume,
		Mutable: maps.Clone(req.GetMutableParameters()),
	}
	if c.cfg.DataRoot != "" && v.Mode == ModeZone && v.Zone != "" {
		// The kind backend mounts <data-root>/zones/<zone> into every node of the zone as
		// the node plugin's <data-root>/zone: this directory is the volume's data there.
		v.Dir = filepath.Join(c.cfg.DataRoot, "zones", v.Zone, v.ID)
		if err := os.MkdirAll(v.Dir, 0o777); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %q: %v", name, err)
		}
		_ = os.Chmod(v.Dir, 0o777) // pods of any uid write into it; umask must not decide
	}
	if source != nil {
		if err := c.fill(v, from); err != nil {
			c.removeData(v)
			return nil, status.Errorf(codes.Internal, "volume %q from %v: %v", name, from, err)
		}
	}
	c.st.Volumes[v.ID] = v
	if err := c.save(); err != nil {
		delete(c.st.Volumes, v.ID)
		c.removeData(v)
		return nil, status.Errorf(codes.Internal, "volume %q: %v", name, err)
	}
	c.log.Eventf("created volume %s name=%q mode=%s zone=%q node=%q bytes=%d content_source=%q",
		v.ID, name, v.Mode, v.Zone, v.Node, size, v.SourceSnapshot+v.SourceVolume)
	return &csi.CreateVolumeResponse{Volume: c.csiVolume(v)}, nil
}

// knobDecision updates the name's attempt counters and decides; the caller holds mu
// and saves the state (a crashed-on-purpose controller must remember its counters).
func (c *Controller) knobDecision(name string, plan *FailPlan, preferred []Segment) (Attempt, bool) {
	sel := SelectedSegment(preferred)
	att := c.st.Attempts[name]
	if att == nil {
		att = &Attempts{}
		c.st.Attempts[name] = att
	}
	if att.FirstNode == "" {
		att.FirstNode = sel[HostnameKey]
	}
	a := Attempt{Node: sel[HostnameKey], Zone: sel[ZoneKey], FirstNode: att.FirstNode, Failed: att.Failed}
	if a.Zone == "" && a.Node != "" {
		a.Zone = c.st.NodeZones[a.Node]
	}
	fail := plan.ShouldFail(a)
	if fail {
		att.Failed++
	}
	return a, fail
}

// failOnPurpose waits fail-delay, then either answers with fail-code or, for
// fail-action=crash, exits as a crashed driver would: mid-call, no answer, before the
// volume exists (the CO sees the connection drop and retries against the restarted one).
func (c *Controller) failOnPurpose(ctx context.Context, req *csi.CreateVolumeRequest, plan *FailPlan, a Attempt) error {
	msg := fmt.Sprintf("volume %q: %s", req.GetName(), plan.Message(a))
	c.sleep(ctx, plan.Delay)
	if plan.Crash {
		c.log.Eventf("crashing on purpose: %s", msg)
		c.log.Call("Controller", "CreateVolume", requestSummary(req), "Crash", msg, plan.Delay, nil)
		c.exit(1)
		return status.Error(codes.Unavailable, msg) // only reached when a test replaced exit
	}
	return status.Error(plan.Code, msg)
}

// learnZones remembers hostname -> zone from segments that carry both keys (the
// external-provisioner's segments come from CSINode topology, so they do), so that
// GetCapacity for a hostname-only segment and node-local volumes know their zone.
func (c *Controller) learnZones(segs []Segment) {
	for _, s := range segs {
		if h, z := s[HostnameKey], s[ZoneKey]; h != "" && z != "" {
			c.st.NodeZones[h] = z
		}
	}
}

// incompatible says why an existing volume cannot answer a repeated CreateVolume ("" when
// it can): the spec wants ALREADY_EXISTS rather than a volume the caller did not ask for.
func incompatible(v *Volume, p Params, required, limit int64, requisite []Segment, source *csi.VolumeContentSource) string {
	var why []string
	if snap, vol := source.GetSnapshot().GetSnapshotId(), source.GetVolume().GetVolumeId(); v.SourceSnapshot != snap || v.SourceVolume != vol {
		why = append(why, fmt.Sprintf("content source snapshot %q volume %q, requested snapshot %q volume %q",
			v.SourceSnapshot, v.SourceVolume, snap, vol))
	}
	if v.Mode != p.Mode {
		why = append(why, fmt.Sprintf("mode %s, requested %s", v.Mode, p.Mode))
	}
	if !Fits(v.CapacityBytes, required, limit) {
		why = append(why, fmt.Sprintf("%d bytes, requested %d..%d", v.CapacityBytes, required, limit))
	}
	if !maps.Equal(v.Parameters, p.Stored) && !(len(v.Parameters) == 0 && len(p.Stored) == 0) {
		why = append(why, fmt.Sprintf("parameters %v, requested %v", v.Parameters, p.Stored))
	}
	if !v.Placement().Satisfies(v.Mode, requisite) {
		why = append(why, fmt.Sprintf("placed in zone %q node %q, outside the requisite topology", v.Zone, v.Node))
	}
	return strings.Join(why, "; ")
}

// csiVolume is the CSI view of a volume.
func (c *Controller) csiVolume(v *Volume) *csi.Volume {
	vctx := map[string]string{CtxTopology: v.Mode, CtxCapacity: strconv.FormatInt(v.CapacityBytes, 10)}
	if v.Zone != "" {
		vctx[CtxZone] = v.Zone
	}
	if v.Node != "" {
		vctx[CtxNode] = v.Node
	}
	if mode, _, cut := ParseNodeSnapshotID(v.SourceSnapshot); cut && mode == ModeNode && v.Mode == ModeNode {
		vctx[CtxNodeSnapshot] = v.SourceSnapshot // its node fills it at the first stage
	}
	return &csi.Volume{
		VolumeId: v.ID, CapacityBytes: v.CapacityBytes, VolumeContext: vctx, ContentSource: contentSource(v),
		AccessibleTopology: toTopology(v.Placement().AccessibleTopology(v.Mode), c.cfg.NodeKey),
	}
}

func newVolumeID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pvchaos-" + hex.EncodeToString(b)
}

// DeleteVolume is idempotent: an unknown id is OK. A volume still published to a node is
// FAILED_PRECONDITION ("Volume in use", which the spec allows): a cloud disk refuses to
// delete an attached disk, and deleting it would pull the data from under a running pod;
// the CO detaches first and retries with backoff.
func (c *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.Volumes[id]
	if v == nil {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published to node(s) %s",
			id, strings.Join(v.PublishedNodes(), ", "))
	}
	att := c.st.Attempts[v.Name]
	delete(c.st.Volumes, id)
	delete(c.st.Attempts, v.Name)
	if err := c.save(); err != nil {
		c.st.Volumes[id] = v
		if att != nil {
			c.st.Attempts[v.Name] = att
		}
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	c.removeData(v)
	c.log.Eventf("deleted volume %s name=%q", id, v.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

// removeData removes the volume's directories this controller can reach.
func (c *Controller) removeData(v *Volume) {
	dirs := []string{v.Dir}
	if c.cfg.NodeDataRoot != "" {
		dirs = append(dirs, filepath.Join(c.cfg.NodeDataRoot, "zone", v.ID), filepath.Join(c.cfg.NodeDataRoot, "local", v.ID))
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			c.log.Eventf("volume %s: its directory %s stays: %v", v.ID, dir, err)
		}
	}
}
