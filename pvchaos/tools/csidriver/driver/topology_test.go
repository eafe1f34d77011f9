package driver

import (
	"errors"
	"reflect"
	"testing"
)

func seg(zone, host string) Segment {
	s := Segment{}
	if zone != "" {
		s[ZoneKey] = zone
	}
	if host != "" {
		s[HostnameKey] = host
	}
	return s
}

func TestChoosePlacement(t *testing.T) {
	req := []Segment{seg("z1", "n1"), seg("z2", "n2"), seg("z2", "n3")}
	cases := []struct {
		name      string
		mode      string
		requisite []Segment
		preferred []Segment
		want      Placement
		err       error // nil, ErrUnsatisfiable, or errAny
	}{
		{"zone: preferred first", ModeZone, req, []Segment{seg("z2", "n3"), seg("z1", "n1")}, Placement{Zone: "z2"}, nil},
		{"zone: preferred not in requisite skipped", ModeZone, req, []Segment{seg("z9", "n9"), seg("z1", "n1")}, Placement{Zone: "z1"}, nil},
		{"zone: requisite only", ModeZone, req, nil, Placement{Zone: "z1"}, nil},
		{"zone: preferred only", ModeZone, nil, []Segment{seg("z3", "")}, Placement{Zone: "z3"}, nil},
		{"zone: no requirements", ModeZone, nil, nil, Placement{}, nil},
		{"zone: segments without zone", ModeZone, []Segment{seg("", "n1")}, nil, Placement{}, ErrUnsatisfiable},
		{"node: preferred first", ModeNode, req, []Segment{seg("z2", "n3")}, Placement{Zone: "z2", Node: "n3"}, nil},
		{"node: requisite only", ModeNode, req, nil, Placement{Zone: "z1", Node: "n1"}, nil},
		{"node: hostname-only segment", ModeNode, []Segment{seg("", "n7")}, nil, Placement{Node: "n7"}, nil},
		{"node: segments without hostname", ModeNode, []Segment{seg("z1", "")}, nil, Placement{}, ErrUnsatisfiable},
		{"node: no requirements", ModeNode, nil, nil, Placement{}, errAny},
	}
	for _, c := range cases {
		got, err := ChoosePlacement(c.mode, c.requisite, c.preferred)
		switch {
		case c.err == nil && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.err == errAny && (err == nil || errors.Is(err, ErrUnsatisfiable)):
			t.Errorf("%s: want a plain (INVALID_ARGUMENT) error, got %v", c.name, err)
		case c.err == ErrUnsatisfiable && !errors.Is(err, ErrUnsatisfiable):
			t.Errorf("%s: want ErrUnsatisfiable, got %v", c.name, err)
		case c.err == nil && got != c.want:
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

var errAny = errors.New("any error")

func TestAccessibleTopology(t *testing.T) {
	if got := (Placement{Zone: "z1", Node: "n1"}).AccessibleTopology(ModeNode); !reflect.DeepEqual(got, []Segment{{HostnameKey: "n1"}}) {
		t.Errorf("node mode reports just the hostname: %v", got)
	}
	if got := (Placement{Zone: "z1"}).AccessibleTopology(ModeZone); !reflect.DeepEqual(got, []Segment{{ZoneKey: "z1"}}) {
		t.Errorf("zone mode: %v", got)
	}
	if got := (Placement{}).AccessibleTopology(ModeZone); got != nil {
		t.Errorf("unconstrained: %v", got)
	}
}

func TestSatisfies(t *testing.T) {
	if !(Placement{Zone: "z1"}).Satisfies(ModeZone, []Segment{seg("z2", "n2"), seg("z1", "n1")}) {
		t.Error("z1 is in requisite")
	}
	if (Placement{Zone: "z1"}).Satisfies(ModeZone, []Segment{seg("z2", "n2")}) {
		t.Error("z1 is not in requisite")
	}
	if (Placement{Node: "n1"}).Satisfies(ModeNode, []Segment{seg("z1", "n2")}) {
		t.Error("n1 is not in requisite")
	}
}

func TestMisplaceMovesAZonalVolumeOutOfTheChosenZone(t *testing.T) {
	requisite := []Segment{{ZoneKey: "zone-a"}, {ZoneKey: "zone-b"}}
	if got := Misplace(ModeZone, Placement{Zone: "zone-a"}, requisite); got.Zone != "zone-b" {
		t.Fatalf("misplaced to %q, want zone-b", got.Zone)
	}
	if got := Misplace(ModeZone, Placement{Zone: "zone-a"}, requisite[:1]); got.Zone != "zone-a" {
		t.Fatalf("one allowed zone: %q, want zone-a", got.Zone)
	}
	if got := Misplace(ModeNode, Placement{Zone: "zone-a", Node: "n1"}, requisite); got.Node != "n1" {
		t.Fatalf("node mode must not move: %+v", got)
	}
}
