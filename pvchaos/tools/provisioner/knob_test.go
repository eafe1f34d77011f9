package main

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func TestParseFailPlanWithoutKnob(t *testing.T) {
	plan, err := parseFailPlan(map[string]string{"type": "ssd"})
	if err != nil || plan != nil {
		t.Fatalf("a class without pvchaos.dev/ keys has no plan: got %+v, %v", plan, err)
	}
}

func TestParseFailPlanDefaults(t *testing.T) {
	plan, err := parseFailPlan(map[string]string{keyReason: "disk full"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.times != -1 || plan.action != controller.ProvisioningReschedule || plan.reason != "disk full" || plan.delay != 0 {
		t.Fatalf("defaults: fail always, reschedule; got %+v", plan)
	}
}

func TestParseFailPlanEveryKey(t *testing.T) {
	plan, err := parseFailPlan(map[string]string{
		keyTimes: "2", keyNodes: "n1, n2", keyZones: "zone-a", keyFirstNode: "true",
		keyAction: "in-background", keyDelay: "250ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	if plan.times != 2 || !plan.nodes["n1"] || !plan.nodes["n2"] || !plan.zones["zone-a"] || !plan.firstNode ||
		plan.action != controller.ProvisioningInBackground || plan.delay != 250*time.Millisecond || plan.reason != defaultReason {
		t.Fatalf("parsed %+v", plan)
	}
}

func TestParseFailPlanRejects(t *testing.T) {
	for params, want := range map[[2]string]string{
		{knobPrefix + "fail-time", "1"}: "unknown parameter",
		{keyTimes, "-1"}:                keyTimes,
		{keyTimes, "twice"}:             keyTimes,
		{keyNodes, "n1,,n2"}:            "empty entry",
		{keyFirstNode, "yes please"}:    keyFirstNode,
		{keyAction, "explode"}:          "finished, in-background, reschedule",
		{keyDelay, "soon"}:              keyDelay,
		{keyCode, "OutOfSpace"}:         "want a gRPC code name",
	} {
		_, err := parseFailPlan(map[string]string{params[0]: params[1]})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%q: want an error containing %q, got %v", params[0], params[1], want, err)
		}
	}
}

func TestDecision(t *testing.T) {
	plan := func(params map[string]string) *failPlan {
		p, err := parseFailPlan(params)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name   string
		params map[string]string
		a      attempt
		want   bool
	}{
		{"always, any node", map[string]string{keyTimes: "always"}, attempt{node: "n1", failed: 7}, true},
		{"always, no node (Immediate)", map[string]string{keyReason: "x"}, attempt{}, true},
		{"first 2: third attempt passes", map[string]string{keyTimes: "2"}, attempt{node: "n1", failed: 2}, false},
		{"first 2: second attempt fails", map[string]string{keyTimes: "2"}, attempt{node: "n1", failed: 1}, true},
		{"zero times never fails", map[string]string{keyTimes: "0"}, attempt{node: "n1"}, false},
		{"listed node", map[string]string{keyNodes: "n1"}, attempt{node: "n1"}, true},
		{"unlisted node", map[string]string{keyNodes: "n1"}, attempt{node: "n2"}, false},
		{"node list, Immediate", map[string]string{keyNodes: "n1"}, attempt{}, false},
		{"listed zone", map[string]string{keyZones: "a,b"}, attempt{node: "n3", zone: "b"}, true},
		{"unlisted zone", map[string]string{keyZones: "a"}, attempt{node: "n3", zone: "c"}, false},
		{"first node selected again", map[string]string{keyFirstNode: "true"}, attempt{node: "n1", firstNode: "n1", failed: 3}, true},
		{"another node after the first", map[string]string{keyFirstNode: "true"}, attempt{node: "n2", firstNode: "n1", failed: 1}, false},
		{"first node, but fail-times used up", map[string]string{keyFirstNode: "true", keyTimes: "1"}, attempt{node: "n1", firstNode: "n1", failed: 1}, false},
		{"zone or node: node matches", map[string]string{keyNodes: "n9", keyZones: "a"}, attempt{node: "n9", zone: "z"}, true},
	}
	for _, c := range cases {
		if got := plan(c.params).shouldFail(c.a); got != c.want {
			t.Errorf("%s: shouldFail(%+v) = %v, want %v", c.name, c.a, got, c.want)
		}
	}
}

func TestFailureMessageCarriesReasonNodeAndAction(t *testing.T) {
	p, _ := parseFailPlan(map[string]string{keyReason: "no capacity", keyAction: "finished"})
	msg := p.failure(attempt{node: "zone-a-1", zone: "zone-a", failed: 1}).Error()
	for _, want := range []string{"no capacity", `"zone-a-1"`, `"zone-a"`, "failure 2", "fail-action=finished"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestWithoutKnobKeepsOtherParametersAndLeavesInputAlone(t *testing.T) {
	in := map[string]string{keyTimes: "1", "type": "ssd"}
	out := withoutKnob(in)
	if len(out) != 1 || out["type"] != "ssd" {
		t.Fatalf("got %v", out)
	}
	if in[keyTimes] != "1" {
		t.Fatal("the class's own map was changed")
	}
}

// The CSI driver's knob word reaches the same states upstream's external-provisioner
// gives the library for that gRPC code.
func TestFailCodeMapsAsUpstream(t *testing.T) {
	for code, want := range map[string]controller.ProvisioningState{
		"ResourceExhausted": controller.ProvisioningReschedule,
		"Unavailable":       controller.ProvisioningInBackground,
		"Internal":          controller.ProvisioningFinished,
	} {
		p, err := parseFailPlan(map[string]string{keyCode: code})
		if err != nil || p.action != want {
			t.Errorf("%s: got %v, %v; want %v", code, p, err, want)
		}
	}
}
