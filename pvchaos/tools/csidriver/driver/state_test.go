package driver

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	st, err := LoadState(path)
	if err != nil || len(st.Volumes) != 0 {
		t.Fatalf("missing file = empty state: %v %v", st, err)
	}
	st.Volumes["v1"] = &Volume{
		ID: "v1", Name: "pvc-1", CapacityBytes: Gi, Mode: ModeZone, Zone: "z1", Parameters: map[string]string{"a": "b"},
		AccessModes: []string{"SINGLE_NODE_WRITER"}, Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Published: map[string]*Attachment{"n1": {AccessMode: "SINGLE_NODE_WRITER", Readonly: true}},
	}
	st.Volumes["v2"] = &Volume{ID: "v2", Name: "pvc-3", CapacityBytes: Gi, Mode: ModeNode, Node: "n1", AccessModes: []string{},
		SourceSnapshot: "s1", Created: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
	st.Snapshots["s1"] = &Snapshot{ID: "s1", Name: "snap-1", SourceVolumeID: "v1", SizeBytes: Gi, Mode: ModeZone, Zone: "z1",
		Parameters: map[string]string{"k": "v"}, Dir: "/data/snapshots/s1", Created: time.Date(2026, 1, 2, 3, 4, 7, 0, time.UTC)}
	st.NodeZones["n1"] = "z1"
	st.Attempts["pvc-2"] = &Attempts{Failed: 2, FirstNode: "n3"}
	if err := st.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, st)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
	if back.ByName("pvc-1") == nil || back.UsedInZone("z1") != Gi || back.SnapshotByName("snap-1") == nil || back.AttachedTo("n1") != 1 {
		t.Fatal("lookups on the loaded state")
	}
	os.WriteFile(path, []byte(`{"volumes": {}}`), 0o644) // a file from before snapshots
	if old, err := LoadState(path); err != nil || old.Snapshots == nil {
		t.Fatalf("old state file: %v %v", old, err)
	}
	os.WriteFile(path, []byte("{not json"), 0o644)
	if _, err := LoadState(path); err == nil {
		t.Fatal("corrupt state: want an error")
	}
}
