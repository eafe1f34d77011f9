package driver

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func TestParseFailPlanNoneWithoutKnobKeys(t *testing.T) {
	plan, err := ParseFailPlan(map[string]string{"other": "x", ParamTopology: "zone"})
	if err != nil || plan != nil {
		t.Fatalf("want nil plan, got %+v, %v", plan, err)
	}
}

func TestParseFailPlanDefaults(t *testing.T) {
	plan, err := ParseFailPlan(map[string]string{keyZones: "z1, z2"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Times != -1 || plan.Code != codes.ResourceExhausted || plan.Crash || plan.Reason != defaultReason || plan.Delay != 0 {
		t.Fatalf("defaults: %+v", plan)
	}
	if !plan.Zones["z1"] || !plan.Zones["z2"] || len(plan.Zones) != 2 {
		t.Fatalf("zones: %v", plan.Zones)
	}
}

func TestParseFailPlanAllKeys(t *testing.T) {
	plan, err := ParseFailPlan(map[string]string{
		keyTimes: "2", keyNodes: "n1", keyFirstNode: "true", keyCode: "Unavailable",
		keyAction: "crash", keyReason: "disk array on fire", keyDelay: "250ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Times != 2 || !plan.Nodes["n1"] || !plan.FirstNode || plan.Code != codes.Unavailable || !plan.Crash ||
		plan.Reason != "disk array on fire" || plan.Delay != 250*time.Millisecond {
		t.Fatalf("parsed: %+v", plan)
	}
}

func TestFailCodeSpellings(t *testing.T) {
	for in, want := range map[string]codes.Code{"Internal": codes.Internal, "DEADLINE_EXCEEDED": codes.DeadlineExceeded, "InvalidArgument": codes.InvalidArgument, "ABORTED": codes.Aborted} {
		if p, err := ParseFailPlan(map[string]string{keyCode: in}); err != nil || p.Code != want {
			t.Errorf("%s: %v %v", in, p, err)
		}
	}
}

func TestParseFailPlanRejectsBadValues(t *testing.T) {
	for _, params := range []map[string]string{
		{keyTimes: "-1"}, {keyTimes: "many"}, {keyNodes: "a,,b"}, {keyFirstNode: "yes please"},
		{keyCode: "Teapot"}, {keyCode: "OK"}, {keyAction: "reschedule"}, {keyDelay: "soon"}, {keyDelay: "-1s"},
	} {
		if _, err := ParseFailPlan(params); err == nil {
			t.Errorf("%v: want an error", params)
		} else {
			for k := range params {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("%v: error %q does not name the key", params, err)
				}
			}
		}
	}
}

func TestParseParamsUnknownKeyNamed(t *testing.T) {
	_, err := ParseParams(map[string]string{"pvchaos.dev/fail-zone": "z1"})
	if err == nil || !strings.Contains(err.Error(), `"pvchaos.dev/fail-zone"`) {
		t.Fatalf("want an error naming the typo, got %v", err)
	}
	if _, err := ParseParams(map[string]string{ParamTopology: "region"}); err == nil {
		t.Fatal("topology=region: want an error")
	}
	p, err := ParseParams(map[string]string{ParamTopology: "node", keyTimes: "1", "csi.storage.k8s.io/pvc/name": "c"})
	if err != nil || p.Mode != ModeNode || p.Plan == nil {
		t.Fatalf("got %+v, %v", p, err)
	}
	if _, kept := p.Stored[keyTimes]; kept || p.Stored["csi.storage.k8s.io/pvc/name"] != "c" || p.Stored[ParamTopology] != "node" {
		t.Fatalf("stored parameters must lose the knob and keep the rest: %v", p.Stored)
	}
}

func TestDecision(t *testing.T) {
	mustPlan := func(params map[string]string) *FailPlan {
		p, err := ParseFailPlan(params)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name   string
		params map[string]string
		a      Attempt
		want   bool
	}{
		{"always, no filter", map[string]string{keyTimes: "always"}, Attempt{Failed: 7}, true},
		{"times not used up", map[string]string{keyTimes: "2"}, Attempt{Failed: 1}, true},
		{"times used up", map[string]string{keyTimes: "2"}, Attempt{Failed: 2}, false},
		{"times zero", map[string]string{keyTimes: "0"}, Attempt{}, false},
		{"node listed", map[string]string{keyNodes: "n1,n2"}, Attempt{Node: "n2"}, true},
		{"node not listed", map[string]string{keyNodes: "n1"}, Attempt{Node: "n3", Zone: "z1"}, false},
		{"no node, node filter", map[string]string{keyNodes: "n1"}, Attempt{}, false},
		{"zone listed", map[string]string{keyZones: "z1"}, Attempt{Node: "n9", Zone: "z1"}, true},
		{"zone not listed", map[string]string{keyZones: "z1"}, Attempt{Node: "n9", Zone: "z2"}, false},
		{"first node again", map[string]string{keyFirstNode: "true"}, Attempt{Node: "n1", FirstNode: "n1"}, true},
		{"another node", map[string]string{keyFirstNode: "true"}, Attempt{Node: "n2", FirstNode: "n1"}, false},
		{"first node, times used up", map[string]string{keyFirstNode: "true", keyTimes: "1"}, Attempt{Node: "n1", FirstNode: "n1", Failed: 1}, false},
	}
	for _, c := range cases {
		if got := mustPlan(c.params).ShouldFail(c.a); got != c.want {
			t.Errorf("%s: ShouldFail = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMessageNamesWhereAndWhat(t *testing.T) {
	p, _ := ParseFailPlan(map[string]string{keyCode: "Internal", keyReason: "boom"})
	msg := p.Message(Attempt{Node: "n1", Zone: "z1", Failed: 2})
	for _, want := range []string{"boom", `"n1"`, `"z1"`, "failure 3", "Internal"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
