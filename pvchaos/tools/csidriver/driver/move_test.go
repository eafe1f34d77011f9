package driver

import (
	"os"
	"path/filepath"
	"testing"
)

func TestVolumeMovesReadsTheOperatorsRecord(t *testing.T) {
	dir := t.TempDir()
	if m, err := VolumeMoves(dir); err != nil || len(m) != 0 {
		t.Fatalf("no file: want no moves, got %v %v", m, err)
	}
	if err := os.WriteFile(filepath.Join(dir, MovesFile), []byte(`{"v1": "node-b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := VolumeMoves(dir)
	if err != nil || m["v1"] != "node-b" {
		t.Fatalf("want v1 -> node-b, got %v %v", m, err)
	}
	if err := os.WriteFile(filepath.Join(dir, MovesFile), []byte(`["v1"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := VolumeMoves(dir); err == nil {
		t.Fatal("a malformed moves.json must be an error, not no moves")
	}
}

func TestApplyMoveMovesOnlyNodeLocalVolumes(t *testing.T) {
	moves := map[string]string{"local": "node-b", "zonal": "node-b"}
	local := &Volume{ID: "local", Mode: ModeNode, Node: "node-a"}
	zonal := &Volume{ID: "zonal", Mode: ModeZone, Zone: "zone-a"}
	if !ApplyMove(local, moves) || local.Node != "node-b" {
		t.Fatalf("the node-local volume must move to node-b, got %+v", local)
	}
	if ApplyMove(local, moves) {
		t.Fatal("a second apply of the same move changes nothing")
	}
	if ApplyMove(zonal, moves) || zonal.Node != "" {
		t.Fatalf("a zonal volume never moves, got %+v", zonal)
	}
	if _, err := CheckPublish(local, 0, PublishRequest{NodeID: "node-a", Hostname: "node-a"}); err == nil {
		t.Fatal("after the move the old node no longer has the volume")
	}
}

func TestNodeServesAMovedVolumeOnlyWhereItsDataWasCopied(t *testing.T) {
	root := t.TempDir()
	n := NewNode(NodeConfig{NodeID: "node-b", Hostname: "node-b", DataRoot: root}, nil)
	vctx := map[string]string{CtxTopology: ModeNode, CtxNode: "node-a"}
	if err := n.checkLocal("v1", vctx); err == nil {
		t.Fatal("node-b has no copy of node-a's volume: it must refuse")
	}
	if err := os.MkdirAll(filepath.Join(root, "local", "v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := n.checkLocal("v1", vctx); err != nil {
		t.Fatalf("the operator copied v1 here: it must serve it, got %v", err)
	}
}
