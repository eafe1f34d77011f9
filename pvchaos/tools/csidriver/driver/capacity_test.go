package driver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestVolumeSize(t *testing.T) {
	cases := []struct {
		required, limit, want int64
		err                   bool
	}{
		{0, 0, DefaultSize, false},
		{0, 10 * Mi, 10 * Mi, false},
		{1, 0, Mi, false},
		{Mi + 1, 0, 2 * Mi, false},
		{5 * Gi, 5 * Gi, 5 * Gi, false},
		{Mi + 1, 3*Mi - 1, 2 * Mi, false},
		{Mi + 1, 2*Mi - 1, 0, true}, // no multiple of 1Mi in range
		{2 * Mi, Mi, 0, true},       // required > limit
		{-1, 0, 0, true},
		{0, Mi / 2, 0, true},
	}
	for _, c := range cases {
		got, err := VolumeSize(c.required, c.limit)
		if c.err {
			if !errors.Is(err, ErrOutOfRange) {
				t.Errorf("VolumeSize(%d, %d): want ErrOutOfRange, got %d, %v", c.required, c.limit, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("VolumeSize(%d, %d) = %d, %v; want %d", c.required, c.limit, got, err, c.want)
		}
	}
}

func TestParseQuantity(t *testing.T) {
	good := map[string]int64{"10Gi": 10 * Gi, "1024": 1024, "1Mi": Mi, "500M": 500e6, "1.5Gi": 3 * Gi / 2, "0": 0, "1k": 1000, "1e3": 1000, " 2Ti ": 2 * Ti, "0.5": 1}
	for in, want := range good {
		if got, err := ParseQuantity(in); err != nil || got != want {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Gi", "10GB", "-1Gi", "ten", "9999999Ei"} {
		if _, err := ParseQuantity(in); err == nil {
			t.Errorf("ParseQuantity(%q): want an error", in)
		}
	}
}

func TestZoneCapacities(t *testing.T) {
	dir := t.TempDir()
	if m, err := ZoneCapacities(dir); err != nil || len(m) != 0 {
		t.Fatalf("no file: %v %v", m, err)
	}
	if m, err := ZoneCapacities(""); err != nil || len(m) != 0 {
		t.Fatalf("no dir: %v %v", m, err)
	}
	os.WriteFile(filepath.Join(dir, "capacity.json"), []byte(`{"z1": "10Gi", "z2": "0"}`), 0o644)
	m, err := ZoneCapacities(dir)
	if err != nil || m["z1"] != 10*Gi || m["z2"] != 0 || len(m) != 2 {
		t.Fatalf("got %v %v", m, err)
	}
	os.WriteFile(filepath.Join(dir, "capacity.json"), []byte(`{"z1": "lots"}`), 0o644)
	if _, err := ZoneCapacities(dir); err == nil {
		t.Fatal("bad quantity: want an error")
	}
}

func TestRemaining(t *testing.T) {
	caps := map[string]int64{"z1": 10 * Gi}
	if free, limited := Remaining(caps, "z1", 3*Gi); free != 7*Gi || !limited {
		t.Errorf("z1: %d %v", free, limited)
	}
	if free, limited := Remaining(caps, "z1", 11*Gi); free != 0 || !limited {
		t.Errorf("over-provisioned z1: %d %v", free, limited)
	}
	if free, limited := Remaining(caps, "z2", 3*Gi); free != Unlimited || limited {
		t.Errorf("z2 unlimited: %d %v", free, limited)
	}
	if free, limited := Remaining(caps, "", 0); free != Unlimited || limited {
		t.Errorf("no zone: %d %v", free, limited)
	}
}
