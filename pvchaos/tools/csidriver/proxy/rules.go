// Package proxy is a transparent gRPC proxy for any CSI driver's unix socket: every call
// is forwarded as raw frames, unchanged, unless a rule matches; then the rule's action
// (an error, a delay, a hang, a closed connection, a failed reply after the call went
// through) happens instead. Rules come from a JSON file re-read whenever it changes, so a
// test changes them while the proxy runs; every call is one JSON line in a log.
//
// Why raw frames: the proxy must not know the driver (a vendor's driver may speak a newer
// CSI than ours), so it decodes a request only to match and summarise it, and forwards
// the bytes it received.
package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// Actions a rule can take.
const (
	ActionError     = "error"      // return Code and Message; the driver never sees the call
	ActionDelay     = "delay"      // wait DelayMS, then forward
	ActionHang      = "hang"       // never answer: the caller's deadline ends the call
	ActionClose     = "close"      // close the caller's connection (a crashed driver, a dropped socket)
	ActionFailReply = "fail_reply" // forward, then return Code and Message instead of the reply
)

// Rule selects calls and says what happens to them. Empty selectors match anything.
type Rule struct {
	ID          string            `json:"id,omitempty"`
	Method      string            `json:"method"`                // "/csi.v1.Node/NodeStageVolume" or "NodeStageVolume"
	VolumeID    string            `json:"volume_id,omitempty"`   // the request's volume_id
	SnapshotID  string            `json:"snapshot_id,omitempty"` // the request's snapshot_id (DeleteSnapshot)
	NodeID      string            `json:"node_id,omitempty"`     // the request's node_id (ControllerPublish/Unpublish)
	Name        string            `json:"name,omitempty"`        // the request's name (CreateVolume: the PV name)
	Segment     map[string]string `json:"segment,omitempty"`     // CreateVolume: the first preferred topology (the selected node's) has these
	Nth         int               `json:"nth,omitempty"`         // only the nth matching call (1-based)
	Times       int               `json:"times,omitempty"`       // fire at most this many times (0: always)
	Probability float64           `json:"probability,omitempty"`
	Seed        int64             `json:"seed,omitempty"`
	Action      string            `json:"action"`
	Code        string            `json:"code,omitempty"` // a gRPC code name: "ResourceExhausted"
	Message     string            `json:"message,omitempty"`
	DelayMS     int               `json:"delay_ms,omitempty"`
}

// File is what the rules file holds.
type File struct {
	Rules []Rule `json:"rules"`
}

var codeByName = func() map[string]codes.Code {
	m := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		m[c.String()] = c
	}
	return m
}()

// CodeOf is the gRPC code of a name ("NotFound"); false for an unknown name.
func CodeOf(name string) (codes.Code, bool) {
	c, ok := codeByName[name]
	return c, ok
}

// Validate names the first problem of a rule.
func (r Rule) Validate() error {
	if r.Method == "" {
		return errors.New("method is required")
	}
	switch r.Action {
	case ActionError, ActionFailReply:
		c, ok := CodeOf(r.Code)
		if !ok || c == codes.OK {
			return fmt.Errorf("action %s: code %q is not a gRPC error code name (e.g. Internal, ResourceExhausted)", r.Action, r.Code)
		}
	case ActionDelay:
		if r.DelayMS <= 0 {
			return errors.New("action delay: delay_ms must be > 0")
		}
	case ActionHang, ActionClose:
	default:
		return fmt.Errorf("action %q: want one of error, delay, hang, close, fail_reply", r.Action)
	}
	if r.Nth < 0 || r.Times < 0 || r.DelayMS < 0 {
		return errors.New("nth, times and delay_ms must be >= 0")
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("probability %v: want 0 (always) to 1", r.Probability)
	}
	return nil
}

// Parse reads a rules file's bytes; an empty file is no rules.
func Parse(data []byte) ([]Rule, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("rules: %v", err)
	}
	for i, r := range f.Rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("rule %d (%s): %v", i+1, r.ID, err)
		}
	}
	return f.Rules, nil
}

// Call is what a rule is matched against.
type Call struct {
	Method     string
	VolumeID   string
	SnapshotID string
	NodeID     string
	Name       string
	Segment    map[string]string
}

func (r Rule) selects(c Call) bool {
	if r.Method != c.Method && !strings.HasSuffix(c.Method, "/"+r.Method) {
		return false
	}
	if (r.VolumeID != "" && r.VolumeID != c.VolumeID) || (r.NodeID != "" && r.NodeID != c.NodeID) ||
		(r.Name != "" && r.Name != c.Name) || (r.SnapshotID != "" && r.SnapshotID != c.SnapshotID) {
		return false
	}
	for k, v := range r.Segment {
		if c.Segment[k] != v {
			return false
		}
	}
	return true
}

// ruleState is a rule's counters, kept while the rule is unchanged in the file.
type ruleState struct {
	seen, fired int
	rng         *rand.Rand
}

// Set is the rules in force and their counters. Safe for concurrent calls.
type Set struct {
	mu     sync.Mutex
	path   string
	stamp  string // the file's mtime and size when last read
	rules  []Rule
	states map[string]*ruleState // by the rule's JSON: an unchanged rule keeps its count across edits
	onLoad func(error)
}

// NewSet reads the rules file (a missing file is no rules); a bad file is an error.
func NewSet(path string, onLoad func(error)) (*Set, error) {
	s := &Set{path: path, states: map[string]*ruleState{}, onLoad: onLoad}
	if err := s.reload(true); err != nil {
		return nil, err
	}
	return s, nil
}

func stampOf(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "absent", nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size()), nil
}

// reload re-reads the file when its mtime or size changed. A bad file keeps the rules
// in force (the error goes to onLoad), except at start, where it is returned.
func (s *Set) reload(first bool) error {
	if s.path == "" {
		return nil
	}
	stamp, err := stampOf(s.path)
	if err == nil && stamp == s.stamp {
		return nil
	}
	var rules []Rule
	if err == nil && stamp != "absent" {
		var data []byte
		if data, err = os.ReadFile(s.path); err == nil {
			rules, err = Parse(data)
		}
	}
	if err != nil {
		if first {
			return err
		}
		s.stamp = stamp // report a bad file once, not on every call
		if s.onLoad != nil {
			s.onLoad(err)
		}
		return nil
	}
	states := map[string]*ruleState{}
	for _, r := range rules {
		key, _ := json.Marshal(r)
		if st, ok := s.states[string(key)]; ok {
			states[string(key)] = st
		}
	}
	s.stamp, s.rules, s.states = stamp, rules, states
	if s.onLoad != nil && !first {
		s.onLoad(nil)
	}
	return nil
}

// Match is the first rule that fires for this call, counting it; nil: forward unchanged.
func (s *Set) Match(c Call) *Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.reload(false)
	for i := range s.rules {
		r := &s.rules[i]
		if !r.selects(c) {
			continue
		}
		key, _ := json.Marshal(r)
		st := s.states[string(key)]
		if st == nil {
			st = &ruleState{rng: rand.New(rand.NewSource(r.Seed))}
			s.states[string(key)] = st
		}
		st.seen++
		if r.Nth > 0 && st.seen != r.Nth {
			continue
		}
		if r.Times > 0 && st.fired >= r.Times {
			continue
		}
		if r.Probability > 0 && st.rng.Float64() >= r.Probability {
			continue
		}
		st.fired++
		out := *r
		return &out
	}
	return nil
}

// Delay is a rule's delay as a duration.
func (r Rule) Delay() time.Duration { return time.Duration(r.DelayMS) * time.Millisecond }
