package driver

// The controller's state: volumes, their attachments, snapshots, what it learnt about
// nodes, and the knob's attempt counters. Saved as JSON (temp file + rename, so a crash mid-write leaves
// the previous file) after every change and loaded at start, so a restarted controller,
// and one the knob crashed on purpose, keeps its volumes, attachments and counters.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Attachment is one ControllerPublishVolume that succeeded.
type Attachment struct {
	AccessMode string `json:"access_mode"` // csi.VolumeCapability_AccessMode_Mode name
	Readonly   bool   `json:"readonly"`
}

// Volume is one created volume.
type Volume struct {
	ID            string                 `json:"id"`
	Name          string                 `json:"name"`
	CapacityBytes int64                  `json:"capacity_bytes"`
	Mode          string                 `json:"mode"`           // ModeZone | ModeNode
	Zone          string                 `json:"zone,omitempty"` // zone mode: its zone; node mode: the node's zone when known
	Node          string                 `json:"node,omitempty"` // node mode: the hostname
	Parameters    map[string]string      `json:"parameters,omitempty"`
	AccessModes   []string               `json:"access_modes"`
	Dir           string                 `json:"dir,omitempty"` // backing directory the controller made (--data-root)
	Created       time.Time              `json:"created"`
	Published     map[string]*Attachment `json:"published,omitempty"` // node id -> attachment
	// The volume_content_source it was made from (at most one of the two): a restore or a clone.
	SourceSnapshot string `json:"source_snapshot,omitempty"`
	SourceVolume   string `json:"source_volume,omitempty"`
	// The mutable parameters (a VolumeAttributesClass's) it was created or last modified with.
	Mutable map[string]string `json:"mutable_parameters,omitempty"`
}

// Placement of the volume.
func (v *Volume) Placement() Placement { return Placement{Zone: v.Zone, Node: v.Node} }

// PublishedNodes are the node ids the volume is attached to, sorted.
func (v *Volume) PublishedNodes() []string { return sortedKeys(v.Published) }

// Snapshot is one cut snapshot: a copy of its source's bytes (Dir), and the source's
// mode and placement, which a restore keeps even after the source is deleted.
type Snapshot struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	SourceVolumeID string            `json:"source_volume_id"`
	SizeBytes      int64             `json:"size_bytes"` // the source's capacity
	Mode           string            `json:"mode"`
	Zone           string            `json:"zone,omitempty"`
	Node           string            `json:"node,omitempty"`
	Parameters     map[string]string `json:"parameters,omitempty"`
	Dir            string            `json:"dir,omitempty"` // the copy ("" without --data-root: no bytes anywhere)
	Created        time.Time         `json:"created"`
}

// Placement of the snapshot's source.
func (s *Snapshot) Placement() Placement { return Placement{Zone: s.Zone, Node: s.Node} }

// Attempts are the knob's per-name counters (fail-times, fail-first-node).
type Attempts struct {
	Failed    int    `json:"failed"`
	FirstNode string `json:"first_node,omitempty"`
}

// State is the whole file.
type State struct {
	Volumes   map[string]*Volume   `json:"volumes"`    // by volume id
	Snapshots map[string]*Snapshot `json:"snapshots"`  // by snapshot id
	NodeZones map[string]string    `json:"node_zones"` // hostname -> zone, learnt from requirements
	Attempts  map[string]*Attempts `json:"knob_attempts"`
}

// NewState is an empty state.
func NewState() *State {
	return &State{Volumes: map[string]*Volume{}, Snapshots: map[string]*Snapshot{}, NodeZones: map[string]string{}, Attempts: map[string]*Attempts{}}
}

// LoadState reads the file; a missing file is an empty state (first start).
func LoadState(path string) (*State, error) {
	st := NewState()
	if path == "" {
		return st, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("state file %s: %v", path, err)
	}
	if st.Volumes == nil {
		st.Volumes = map[string]*Volume{}
	}
	if st.Snapshots == nil { // a state file from before snapshots
		st.Snapshots = map[string]*Snapshot{}
	}
	if st.NodeZones == nil {
		st.NodeZones = map[string]string{}
	}
	if st.Attempts == nil {
		st.Attempts = map[string]*Attempts{}
	}
	return st, nil
}

// Save writes the state atomically: a temp file in the same directory, fsynced, renamed.
func (st *State) Save(path string) error {
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ByName finds a volume by its CreateVolume name.
func (st *State) ByName(name string) *Volume {
	for _, v := range st.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// UsedInZone is the bytes live volumes hold in a zone.
func (st *State) UsedInZone(zone string) int64 {
	var used int64
	for _, v := range st.Volumes {
		if v.Zone == zone {
			used += v.CapacityBytes
		}
	}
	return used
}

// AttachedTo counts the volumes published to a node.
func (st *State) AttachedTo(node string) int {
	n := 0
	for _, v := range st.Volumes {
		if v.Published[node] != nil {
			n++
		}
	}
	return n
}

// SortedIDs are the volume ids in order, the order ListVolumes pages through.
func (st *State) SortedIDs() []string { return sortedKeys(st.Volumes) }

// SnapshotByName finds a snapshot by its CreateSnapshot name.
func (st *State) SnapshotByName(name string) *Snapshot {
	for _, s := range st.Snapshots {
		if s.Name == name {
			return s
		}
	}
	return nil
}
