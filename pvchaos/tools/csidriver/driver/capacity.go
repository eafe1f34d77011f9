package driver

// Sizes: capacity_range arithmetic, Kubernetes-style quantities in capacity.json, and the
// per-zone capacity that --control-dir lets a test change while the driver runs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
)

const (
	Mi = int64(1) << 20
	Gi = int64(1) << 30
	Ti = int64(1) << 40

	// DefaultSize is what a CreateVolume without capacity_range gets.
	DefaultSize = Gi
	// Unlimited is the free capacity reported for a zone the control file does not limit.
	Unlimited = Ti
)

// ErrOutOfRange marks a capacity_range no volume can satisfy (OUT_OF_RANGE).
var ErrOutOfRange = errors.New("unsupported capacity_range")

// VolumeSize is the size for a capacity_range: the required bytes (DefaultSize when 0,
// capped by the limit) rounded up to 1Mi, as a disk allocates whole units; when that
// overshoots the limit, the largest multiple of 1Mi within it, if still >= required.
func VolumeSize(required, limit int64) (int64, error) {
	if required < 0 || limit < 0 {
		return 0, fmt.Errorf("%w: negative bytes (required %d, limit %d)", ErrOutOfRange, required, limit)
	}
	if limit > 0 && required > limit {
		return 0, fmt.Errorf("%w: required %d bytes > limit %d bytes", ErrOutOfRange, required, limit)
	}
	want := required
	if want == 0 {
		want = DefaultSize
		if limit > 0 && want > limit {
			want = limit
		}
	}
	size := (want + Mi - 1) / Mi * Mi
	if limit > 0 && size > limit {
		size = limit / Mi * Mi
		if size < required || size == 0 {
			return 0, fmt.Errorf("%w: no multiple of 1Mi between %d and %d bytes", ErrOutOfRange, required, limit)
		}
	}
	return size, nil
}

// Fits says whether an existing volume of `size` bytes satisfies a capacity_range (the
// idempotency check of CreateVolume).
func Fits(size, required, limit int64) bool {
	return size >= required && (limit == 0 || size <= limit)
}

var suffixes = map[string]*big.Int{
	"":   big.NewInt(1),
	"Ki": big.NewInt(1 << 10), "Mi": big.NewInt(1 << 20), "Gi": big.NewInt(1 << 30),
	"Ti": big.NewInt(1 << 40), "Pi": big.NewInt(1 << 50), "Ei": big.NewInt(1 << 60),
	"k": big.NewInt(1e3), "M": big.NewInt(1e6), "G": big.NewInt(1e9),
	"T": big.NewInt(1e12), "P": big.NewInt(1e15), "E": big.NewInt(1e18),
}

// ParseQuantity reads a Kubernetes quantity of bytes ("10Gi", "500M", "1.5Gi", "1024"),
// rounding a fractional byte up, as resource.Quantity does. No exponent forms.
func ParseQuantity(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') })
	mult, ok := suffixes[s[len(num):]]
	if !ok || num == "" {
		return 0, fmt.Errorf("quantity %q: want a number with an optional suffix (Ki Mi Gi Ti Pi Ei k M G T P E)", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || r.Sign() < 0 {
		return 0, fmt.Errorf("quantity %q: %q is not a non-negative number", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt(mult))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("quantity %q: too large", s)
	}
	return q.Int64(), nil
}

// ZoneCapacities reads <controlDir>/capacity.json, {"<zone>": "<quantity>"}. No control
// dir or no file: no limits (an empty map). It is read on every call, so a test changes
// capacity by rewriting the file, without restarting anything.
func ZoneCapacities(controlDir string) (map[string]int64, error) {
	out := map[string]int64{}
	if controlDir == "" {
		return out, nil
	}
	path := filepath.Join(controlDir, "capacity.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var raw map[string]string
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v (want {\"<zone>\": \"<quantity like 10Gi>\"})", path, err)
	}
	for zone, q := range raw {
		n, err := ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("%s: zone %q: %v", path, zone, err)
		}
		out[zone] = n
	}
	return out, nil
}

// Remaining is a zone's free bytes: its capacity minus what its live volumes hold (never
// below 0), or Unlimited when the zone has no capacity configured. limited says which.
func Remaining(capacities map[string]int64, zone string, used int64) (free int64, limited bool) {
	total, ok := capacities[zone]
	if !ok || zone == "" {
		return Unlimited, false
	}
	if used >= total {
		return 0, true
	}
	return total - used, true
}
