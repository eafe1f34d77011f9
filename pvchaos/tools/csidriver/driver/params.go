package driver

// Class parameters: which pvchaos.dev/ keys exist, and the volume mode they choose.

import (
	"fmt"
	"strings"
)

const (
	// ParamTopology chooses the volume mode: "zone" (default) or "node".
	ParamTopology = ParamPrefix + "topology"

	ModeZone = "zone" // zonal, network-like: reachable from every node of one zone
	ModeNode = "node" // node-local: reachable from one node only

	// Keys of volume_context (they reach NodeStage/NodePublish, and the PV's attributes).
	CtxTopology = ParamPrefix + "topology"
	CtxZone     = ParamPrefix + "zone"
	CtxNode     = ParamPrefix + "node"
	// CtxCapacity lets the node size the backing file of a block volume.
	CtxCapacity = ParamPrefix + "capacity-bytes"
)

// Params is what CreateVolume (and GetCapacity) read from class parameters.
type Params struct {
	Mode   string
	Plan   *FailPlan         // nil: no knob
	Stored map[string]string // the parameters minus the knob: what the state file keeps
}

// ParseParams checks every pvchaos.dev/ key (an unknown one is an error naming it), reads
// the mode and the knob. The error text is the INVALID_ARGUMENT message.
func ParseParams(params map[string]string) (Params, error) {
	for _, key := range sortedKeys(params) {
		if strings.HasPrefix(key, ParamPrefix) && key != ParamTopology && !isKnobKey(key) {
			return Params{}, fmt.Errorf("unknown parameter %q (known: %s, %s)", key, ParamTopology, strings.Join(knobKeys, ", "))
		}
	}
	p := Params{Mode: ModeZone, Stored: WithoutKnob(params)}
	if v, ok := params[ParamTopology]; ok {
		if v != ModeZone && v != ModeNode {
			return Params{}, fmt.Errorf("%s=%q: want %q or %q", ParamTopology, v, ModeZone, ModeNode)
		}
		p.Mode = v
	}
	plan, err := ParseFailPlan(params)
	if err != nil {
		return Params{}, err
	}
	p.Plan = plan
	return p, nil
}
