package driver

// The failure knob: StorageClass parameters (they reach CreateVolume as parameters) that
// make CreateVolume fail on purpose, so suites can drive the external-provisioner through
// its error paths with a real CSI driver in the loop. It is the test provisioner's knob
// (tools/provisioner/knob.go) with its fail-action words replaced by the gRPC code the
// driver returns, because the external-provisioner decides what to do (reschedule, retry)
// from that code. Parsing and the decision are pure functions; controller_create.go
// applies them.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// ParamPrefix marks every class parameter this driver reads. An unknown key under it is
// an error, so a typo cannot silently turn into a knob that never fires.
const ParamPrefix = "pvchaos.dev/"

// knobPrefix marks the knob's keys; they are stripped before anything is stored.
const knobPrefix = ParamPrefix + "fail-"

const (
	keyTimes     = knobPrefix + "times"      // N: fail the first N matching attempts of each volume name; "always" (default)
	keyNodes     = knobPrefix + "nodes"      // comma list: fail when the selected node (preferred[0] hostname) is listed
	keyZones     = knobPrefix + "zones"      // comma list: fail when the selected zone (preferred[0] zone) is listed
	keyFirstNode = knobPrefix + "first-node" // "true": fail whenever a name's first selected node is selected again
	keyCode      = knobPrefix + "code"       // gRPC code name to return; ResourceExhausted (default)
	keyAction    = knobPrefix + "action"     // "crash": exit(1) in the middle of the call instead of answering
	keyReason    = knobPrefix + "reason"     // text of the error message
	keyDelay     = knobPrefix + "delay"      // Go duration to wait before failing ("300ms")
)

var knobKeys = []string{keyTimes, keyNodes, keyZones, keyFirstNode, keyCode, keyAction, keyReason, keyDelay}

const defaultReason = "pvchaos.dev: provisioning fails on purpose"

// failCodes are the code names fail-code accepts: every gRPC code but OK, spelled as
// codes.Code.String() spells them ("ResourceExhausted", "DeadlineExceeded", ...) or as
// the CSI spec's tables do ("RESOURCE_EXHAUSTED"), since suites copy from either.
var failCodes = func() map[string]codes.Code {
	m := map[string]codes.Code{}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		m[c.String()] = c
		m[upperSnake(c.String())] = c
	}
	return m
}()

// upperSnake turns "ResourceExhausted" into "RESOURCE_EXHAUSTED".
func upperSnake(camel string) string {
	var b strings.Builder
	for i, r := range camel {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// FailPlan is a class's knob, parsed.
type FailPlan struct {
	Times     int // < 0: every matching attempt
	Nodes     map[string]bool
	Zones     map[string]bool
	FirstNode bool
	Code      codes.Code
	Crash     bool
	Reason    string
	Delay     time.Duration
}

// Attempt is what the decision needs to know about one CreateVolume call.
type Attempt struct {
	Node      string // hostname of the selected node (preferred[0]); "" without requirements
	Zone      string // zone of the selected node (preferred[0]); ""when unknown
	FirstNode string // the first node ever selected for this volume name
	Failed    int    // how many earlier attempts of this name the knob failed
}

// ParseFailPlan reads the knob from class parameters: nil when the class has none of it,
// an error naming the key for a bad value. Unknown pvchaos.dev/ keys are rejected by
// splitParameters, which knows the non-knob keys too.
func ParseFailPlan(params map[string]string) (*FailPlan, error) {
	present := false
	for key := range params {
		if isKnobKey(key) {
			present = true
		}
	}
	if !present {
		return nil, nil
	}
	plan := &FailPlan{Times: -1, Code: codes.ResourceExhausted, Reason: defaultReason}
	if v, ok := params[keyTimes]; ok && v != "always" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a count >= 0 or \"always\"", keyTimes, v)
		}
		plan.Times = n
	}
	var err error
	if plan.Nodes, err = parseList(params, keyNodes); err != nil {
		return nil, err
	}
	if plan.Zones, err = parseList(params, keyZones); err != nil {
		return nil, err
	}
	if v, ok := params[keyFirstNode]; ok {
		if plan.FirstNode, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", keyFirstNode, v)
		}
	}
	if v, ok := params[keyCode]; ok {
		c, known := failCodes[v]
		if !known {
			var names []string
			for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
				names = append(names, c.String())
			}
			return nil, fmt.Errorf("%s=%q: want a gRPC code name, one of %s", keyCode, v, strings.Join(names, ", "))
		}
		plan.Code = c
	}
	if v, ok := params[keyAction]; ok {
		if v != "crash" {
			return nil, fmt.Errorf("%s=%q: the only action is \"crash\" (use %s for the code to return)", keyAction, v, keyCode)
		}
		plan.Crash = true
	}
	if v, ok := params[keyReason]; ok && strings.TrimSpace(v) != "" {
		plan.Reason = v
	}
	if v, ok := params[keyDelay]; ok {
		if plan.Delay, err = time.ParseDuration(v); err != nil || plan.Delay < 0 {
			return nil, fmt.Errorf("%s=%q: want a duration such as 300ms", keyDelay, v)
		}
	}
	return plan, nil
}

// Matches says whether the knob applies to this attempt's node at all: with no node,
// zone or first-node filter, every attempt matches.
func (p *FailPlan) Matches(a Attempt) bool {
	if len(p.Nodes) == 0 && len(p.Zones) == 0 && !p.FirstNode {
		return true
	}
	return (a.Node != "" && p.Nodes[a.Node]) ||
		(a.Zone != "" && p.Zones[a.Zone]) ||
		(p.FirstNode && a.Node != "" && a.Node == a.FirstNode)
}

// ShouldFail is the decision: a matching attempt fails unless fail-times is used up.
func (p *FailPlan) ShouldFail(a Attempt) bool {
	return p.Matches(a) && (p.Times < 0 || a.Failed < p.Times)
}

// Message is the status message of the failure: the reason, where, and which failure
// of the name this is, so a test report shows why without reading the class.
func (p *FailPlan) Message(a Attempt) string {
	where := "no selected node"
	if a.Node != "" {
		where = fmt.Sprintf("selected node %q", a.Node)
	}
	if a.Zone != "" {
		where += fmt.Sprintf(" in zone %q", a.Zone)
	}
	what := keyCode + "=" + p.Code.String()
	if p.Crash {
		what = keyAction + "=crash"
	}
	return fmt.Sprintf("%s (%s, failure %d, %s)", p.Reason, where, a.Failed+1, what)
}

// WithoutKnob returns the parameters minus the knob's keys, so nothing stored (the state
// file, the volume) ever carries them. The input map is not changed.
func WithoutKnob(params map[string]string) map[string]string {
	out := make(map[string]string, len(params))
	for k, v := range params {
		if !strings.HasPrefix(k, knobPrefix) {
			out[k] = v
		}
	}
	return out
}

func isKnobKey(key string) bool {
	for _, k := range knobKeys {
		if k == key {
			return true
		}
	}
	return false
}

func parseList(params map[string]string, key string) (map[string]bool, error) {
	v, ok := params[key]
	if !ok {
		return nil, nil
	}
	set := map[string]bool{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%s=%q: empty entry in the comma list", key, v)
		}
		set[item] = true
	}
	return set, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
