package main

// The failure knob: StorageClass parameters that make the test provisioners fail on
// purpose, so suites can express upstream's rescheduling scenarios (TestRescheduleProvisioning
// fails its mock provisioner on a class parameter the same way). Parsing and the decision
// are pure; failing.go applies them.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// knobPrefix marks every parameter this provisioner reads; other keys are left alone,
// and none of ours reach the PV or anything else the provisioner writes.
const knobPrefix = "pvchaos.dev/"

const (
	keyTimes     = knobPrefix + "fail-times"      // N: fail the first N matching attempts of each claim; "always" (default)
	keyNodes     = knobPrefix + "fail-nodes"      // comma list: fail when the selected node is listed
	keyZones     = knobPrefix + "fail-zones"      // comma list: fail when the selected node's zone is listed
	keyFirstNode = knobPrefix + "fail-first-node" // "true": fail whenever a claim's first selected node is selected again
	keyAction    = knobPrefix + "fail-action"     // reschedule (default) | finished | in-background
	keyReason    = knobPrefix + "fail-reason"     // text of the ProvisioningFailed event
	keyDelay     = knobPrefix + "fail-delay"      // Go duration to wait before failing ("300ms")
	keyCode      = knobPrefix + "fail-code"       // the CSI driver's word: a gRPC code name (codeActions)
)

var knobKeys = []string{keyTimes, keyNodes, keyZones, keyFirstNode, keyAction, keyReason, keyDelay, keyCode}

// codeActions reads the CSI driver pvchaos-csi's knob word (the suites' since CSI came
// into the loop) as upstream's external-provisioner reads the gRPC code it gets back
// (pkg/controller/controller.go checkError): ResourceExhausted gives the claim back,
// the "maybe still running" codes keep it in progress, any other is a final error. The
// double stays selectable for comparison, so it must understand the suites' knob.
var codeActions = map[string]string{
	"ResourceExhausted": "reschedule",
	"Canceled":          "in-background", "DeadlineExceeded": "in-background", "Unavailable": "in-background",
	"Aborted": "in-background",
	"Unknown": "finished", "InvalidArgument": "finished", "NotFound": "finished", "AlreadyExists": "finished",
	"PermissionDenied": "finished", "FailedPrecondition": "finished", "OutOfRange": "finished",
	"Unimplemented": "finished", "Internal": "finished", "DataLoss": "finished", "Unauthenticated": "finished",
}

// actions maps fail-action words to the state the library is handed. Only
// ProvisioningReschedule gives the claim back to the scheduler (selected-node removed);
// ProvisioningFinished keeps the node and retries later; ProvisioningInBackground keeps
// the claim "in progress" and retries too.
var actions = map[string]controller.ProvisioningState{
	"reschedule":    controller.ProvisioningReschedule,
	"finished":      controller.ProvisioningFinished,
	"in-background": controller.ProvisioningInBackground,
}

const defaultReason = "pvchaos.dev: provisioning fails on purpose"

// failPlan is a class's knob, parsed.
type failPlan struct {
	times      int // < 0: every matching attempt
	nodes      map[string]bool
	zones      map[string]bool
	firstNode  bool
	action     controller.ProvisioningState
	actionWord string
	reason     string
	delay      time.Duration
}

// attempt is what the decision needs to know about one Provision call.
type attempt struct {
	node      string // the selected node, "" for Immediate classes
	zone      string // its topology.kubernetes.io/zone, "" when unknown or not needed
	firstNode string // the first node ever selected for this claim
	failed    int    // how many earlier attempts of this claim the knob failed
}

// parseFailPlan reads the knob from class parameters: nil when the class has none of it,
// an error naming the key for an unknown pvchaos.dev/ key or a bad value (a typo must
// not silently turn into a provisioner that never fails).
func parseFailPlan(params map[string]string) (*failPlan, error) {
	present := false
	for key := range params {
		if !strings.HasPrefix(key, knobPrefix) {
			continue
		}
		if !isKnobKey(key) {
			return nil, fmt.Errorf("unknown parameter %q (known: %s)", key, strings.Join(knobKeys, ", "))
		}
		present = true
	}
	if !present {
		return nil, nil
	}
	plan := &failPlan{times: -1, action: controller.ProvisioningReschedule, actionWord: "reschedule", reason: defaultReason}
	if v, ok := params[keyTimes]; ok && v != "always" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a count >= 0 or \"always\"", keyTimes, v)
		}
		plan.times = n
	}
	var err error
	if plan.nodes, err = parseList(params, keyNodes); err != nil {
		return nil, err
	}
	if plan.zones, err = parseList(params, keyZones); err != nil {
		return nil, err
	}
	if v, ok := params[keyFirstNode]; ok {
		if plan.firstNode, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", keyFirstNode, v)
		}
	}
	if v, ok := params[keyCode]; ok {
		word, known := codeActions[v]
		if !known {
			return nil, fmt.Errorf("%s=%q: want a gRPC code name, one of %s", keyCode, v, strings.Join(sortedKeys(codeActions), ", "))
		}
		plan.action, plan.actionWord = actions[word], word
	}
	if v, ok := params[keyAction]; ok {
		state, known := actions[v]
		if !known {
			return nil, fmt.Errorf("%s=%q: want one of %s", keyAction, v, strings.Join(sortedKeys(actions), ", "))
		}
		plan.action, plan.actionWord = state, v
	}
	if v, ok := params[keyReason]; ok && strings.TrimSpace(v) != "" {
		plan.reason = v
	}
	if v, ok := params[keyDelay]; ok {
		if plan.delay, err = time.ParseDuration(v); err != nil || plan.delay < 0 {
			return nil, fmt.Errorf("%s=%q: want a duration such as 300ms", keyDelay, v)
		}
	}
	return plan, nil
}

// matches says whether the knob applies to this attempt's node at all: with no node,
// zone or first-node filter, every attempt matches.
func (p *failPlan) matches(a attempt) bool {
	if len(p.nodes) == 0 && len(p.zones) == 0 && !p.firstNode {
		return true
	}
	return (a.node != "" && p.nodes[a.node]) ||
		(a.zone != "" && p.zones[a.zone]) ||
		(p.firstNode && a.node != "" && a.node == a.firstNode)
}

// shouldFail is the decision: a matching attempt fails unless fail-times is used up.
func (p *failPlan) shouldFail(a attempt) bool {
	return p.matches(a) && (p.times < 0 || a.failed < p.times)
}

// failure is the error the library puts into the ProvisioningFailed event.
func (p *failPlan) failure(a attempt) error {
	where := "no selected node"
	if a.node != "" {
		where = fmt.Sprintf("selected node %q", a.node)
		if a.zone != "" {
			where += fmt.Sprintf(" in zone %q", a.zone)
		}
	}
	return fmt.Errorf("%s (%s, failure %d, %s=%s)", p.reason, where, a.failed+1, keyAction, p.actionWord)
}

// needsZone says whether the decision needs the selected node's zone (a Node read).
func (p *failPlan) needsZone() bool { return len(p.zones) > 0 }

// withoutKnob returns the parameters minus the knob's keys, so nothing downstream
// (the PV, its attributes) ever sees them. The input map is not changed.
func withoutKnob(params map[string]string) map[string]string {
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
