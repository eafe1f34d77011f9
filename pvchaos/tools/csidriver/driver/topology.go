package driver

// Choosing where a new volume lives from CreateVolume's accessibility_requirements.
// Pure: the controller hands in the requirements as plain maps.

import (
	"errors"
	"fmt"
)

const (
	ZoneKey     = "topology.kubernetes.io/zone"
	HostnameKey = "kubernetes.io/hostname"
)

// Segment is one topology segment, key -> value.
type Segment = map[string]string

// FromWire and ToWire translate a driver's own per-node key (--node-topology-key, e.g.
// vendor.example.com/node) to and from HostnameKey, so that placement has one key for
// "the node" however the driver names it to Kubernetes. nodeKey "" is HostnameKey.
func FromWire(s Segment, nodeKey string) Segment { return renameKey(s, nodeKey, HostnameKey) }

func ToWire(s Segment, nodeKey string) Segment { return renameKey(s, HostnameKey, nodeKey) }

func renameKey(s Segment, from, to string) Segment {
	if from == "" || to == "" || from == to {
		return s
	}
	v, ok := s[from]
	if !ok {
		return s
	}
	out := make(Segment, len(s))
	for k, val := range s {
		if k != from {
			out[k] = val
		}
	}
	out[to] = v
	return out
}

// Placement is where a volume goes: a zone (zone mode) or a node (node mode, whose zone is
// recorded too when the segment names it, so node-local volumes count against it).
type Placement struct {
	Zone string
	Node string
}

// ErrUnsatisfiable marks requirements that are well-formed but cannot be met by this
// driver in this mode: the spec's "Unable to provision in accessible_topology", which is
// RESOURCE_EXHAUSTED. Malformed input (node mode without requirements) is a plain error,
// INVALID_ARGUMENT.
var ErrUnsatisfiable = errors.New("unsatisfiable accessibility requirements")

// ChoosePlacement picks the segment: the first preferred segment carrying the mode's key
// whose value requisite also allows (the external-provisioner puts the selected node's
// segment first in preferred), else the first requisite segment carrying the key.
//   - zone mode without any requirements: an unconstrained volume (empty Placement);
//   - node mode without requirements: an error, a node-local volume needs a node;
//   - requirements none of whose segments carry the key: ErrUnsatisfiable (they are valid
//     topology, just not one this mode can place a volume in).
func ChoosePlacement(mode string, requisite, preferred []Segment) (Placement, error) {
	key := ZoneKey
	if mode == ModeNode {
		key = HostnameKey
	}
	if len(requisite) == 0 && len(preferred) == 0 {
		if mode == ModeNode {
			return Placement{}, fmt.Errorf("%s=%s needs accessibility_requirements naming a %s (a node-local volume needs a node; is the class WaitForFirstConsumer?)",
				ParamTopology, ModeNode, HostnameKey)
		}
		return Placement{}, nil
	}
	allowed := func(value string) bool {
		if len(requisite) == 0 {
			return true
		}
		for _, seg := range requisite {
			if seg[key] == value {
				return true
			}
		}
		return false
	}
	pick := func(seg Segment) Placement {
		p := Placement{Zone: seg[ZoneKey]}
		if mode == ModeNode {
			p.Node = seg[HostnameKey]
		}
		return p
	}
	for _, seg := range preferred {
		if v := seg[key]; v != "" && allowed(v) {
			return pick(seg), nil
		}
	}
	for _, seg := range requisite {
		if seg[key] != "" {
			return pick(seg), nil
		}
	}
	return Placement{}, fmt.Errorf("%w: no requisite or preferred segment carries %s (%s=%s)", ErrUnsatisfiable, key, ParamTopology, mode)
}

// Misplace is the --fault-misplace bug: a zonal volume moves to the first requisite zone
// other than the chosen one (unchanged when requisite allows one zone only, or in node
// mode), so its PV's nodeAffinity names a zone the selected node is not in.
func Misplace(mode string, p Placement, requisite []Segment) Placement {
	if mode != ModeZone {
		return p
	}
	for _, seg := range requisite {
		if z := seg[ZoneKey]; z != "" && z != p.Zone {
			return Placement{Zone: z}
		}
	}
	return p
}

// SelectedSegment is the segment the knob matches against: preferred[0], the selected
// node's. Immediate classes have no selected node; then the knob's node and zone lists
// match nothing.
func SelectedSegment(preferred []Segment) Segment {
	if len(preferred) > 0 {
		return preferred[0]
	}
	return nil
}

// AccessibleTopology is what a volume at this placement reports.
func (p Placement) AccessibleTopology(mode string) []Segment {
	switch {
	case mode == ModeNode && p.Node != "":
		return []Segment{{HostnameKey: p.Node}}
	case mode == ModeZone && p.Zone != "":
		return []Segment{{ZoneKey: p.Zone}}
	}
	return nil
}

// Satisfies says whether an existing volume's placement is allowed by new requirements
// (an idempotent CreateVolume retry must not hand back a volume the caller cannot use).
func (p Placement) Satisfies(mode string, requisite []Segment) bool {
	if len(requisite) == 0 {
		return true
	}
	key, value := ZoneKey, p.Zone
	if mode == ModeNode {
		key, value = HostnameKey, p.Node
	}
	if value == "" {
		return true // an unconstrained volume is accessible everywhere
	}
	for _, seg := range requisite {
		if seg[key] == value {
			return true
		}
	}
	return false
}
