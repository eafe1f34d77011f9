package driver

// Snapshots cut on a node (distributed snapshotting): the copy stays where the bytes are,
// the controller restores from the id alone, and the node fills a node-local restore.

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestNodeSnapshotIDParses(t *testing.T) {
	id := NodeSnapshotID("snapshot-1", ModeNode, "kind-worker.a_b")
	if mode, where, ok := ParseNodeSnapshotID(id); !ok || mode != ModeNode || where != "kind-worker.a_b" {
		t.Fatalf("%s parsed as %q %q %v", id, mode, where, ok)
	}
	if id != NodeSnapshotID("snapshot-1", ModeNode, "kind-worker.a_b") {
		t.Fatal("the id of a name must not change between retries")
	}
	for _, other := range []string{"pvchaos-snap-0123", "pvchaos-snap-1@disk@x", "pvchaos-snap-1@node@", "vendor@node@x"} {
		if _, _, ok := ParseNodeSnapshotID(other); ok {
			t.Fatalf("%q is no node-cut snapshot id", other)
		}
	}
}

func TestNodeLocalSnapshotIsCutAndRestoredOnItsNode(t *testing.T) {
	root := t.TempDir()
	log, _ := NewLogger("test", "")
	cfg := NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1", DataRoot: filepath.Join(root, "node")}
	snaps, node := NewNodeSnapshots(cfg, log), NewNode(cfg, log)
	ctx := context.Background()
	writeData(t, filepath.Join(cfg.DataRoot, "local", "vol-src"), "before")

	r, err := snaps.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "vol-src"})
	must(t, err)
	snap := r.GetSnapshot()
	if mode, where, ok := ParseNodeSnapshotID(snap.GetSnapshotId()); !ok || mode != ModeNode || where != "n1" ||
		!snap.GetReadyToUse() || snap.GetSourceVolumeId() != "vol-src" {
		t.Fatalf("snapshot: %v", snap)
	}
	again, err := snaps.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "vol-src"})
	if err != nil || again.GetSnapshot().GetSnapshotId() != snap.GetSnapshotId() ||
		!again.GetSnapshot().GetCreationTime().AsTime().Equal(snap.GetCreationTime().AsTime()) {
		t.Fatalf("a retry answers the same snapshot: %v %v", again, err)
	}
	_, err = snaps.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "vol-other"})
	wantCode(t, err, codes.NotFound, "vol-other")
	writeData(t, filepath.Join(cfg.DataRoot, "local", "vol-other"), "other")
	_, err = snaps.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "vol-other"})
	wantCode(t, err, codes.AlreadyExists, "vol-src")
	writeData(t, filepath.Join(cfg.DataRoot, "local", "vol-src"), "after!")

	// The controller restores from the id alone, on the snapshot's node whatever is preferred.
	f := newFixture(t)
	f.create(createReq("learn", Mi, nodeLocal, seg("z1", "n1"))) // the controller learns n1's zone
	restored := f.create(fromSnapshot(createReq("restored", Mi, nodeLocal, seg("z2", "n2"), seg("z1", "n1")),
		snap.GetSnapshotId()))
	vctx := restored.GetVolumeContext()
	if vctx[CtxNode] != "n1" || vctx[CtxZone] != "z1" || vctx[CtxNodeSnapshot] != snap.GetSnapshotId() ||
		restored.GetAccessibleTopology()[0].GetSegments()[HostnameKey] != "n1" {
		t.Fatalf("restored: %v", restored)
	}
	_, err = f.c.CreateVolume(ctx, fromSnapshot(createReq("elsewhere", Mi, nodeLocal, seg("z2", "n2"), seg("z2", "n2")),
		snap.GetSnapshotId()))
	wantCode(t, err, codes.ResourceExhausted, "requisite")

	// Its node fills it at the first stage, with the bytes of the snapshot's time.
	dir, err := node.ensureBacking(restored.GetVolumeId(), vctx, false)
	must(t, err)
	checkData(t, dir, "before")
	other := NewNode(NodeConfig{NodeID: "n2", Hostname: "n2", Zone: "z1", DataRoot: filepath.Join(root, "n2")}, log)
	must(t, os.MkdirAll(filepath.Join(root, "n2", "local"), 0o755))
	_, err = other.ensureBacking(restored.GetVolumeId(), vctx, false)
	wantCode(t, err, codes.FailedPrecondition, "kept on node n1")

	_, err = NewNodeSnapshots(NodeConfig{NodeID: "n2", Hostname: "n2", DataRoot: root}, log).DeleteSnapshot(ctx,
		&csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
	wantCode(t, err, codes.FailedPrecondition, "kept on node n1")
	for range 2 { // idempotent
		_, err = snaps.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
		must(t, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataRoot, "snapshots", snap.GetSnapshotId())); !os.IsNotExist(err) {
		t.Fatalf("the copy stays after DeleteSnapshot: %v", err)
	}
}

func TestZonalSnapshotCutOnANodeIsRestoredByTheController(t *testing.T) {
	f := newFixture(t)
	src := f.create(createReq("src", 8*Mi, nil, seg("z1", "n1")))
	// the node of zone z1 sees the controller's <data-root>/zones/z1 as its <data-root>/zone
	nodeRoot := t.TempDir()
	must(t, os.Symlink(filepath.Join(f.cfg.DataRoot, "zones", "z1"), filepath.Join(nodeRoot, "zone")))
	writeData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", src.GetVolumeId()), "zonal")
	log, _ := NewLogger("test", "")
	snaps := NewNodeSnapshots(NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1", DataRoot: nodeRoot}, log)
	r, err := snaps.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: src.GetVolumeId()})
	must(t, err)
	if mode, where, _ := ParseNodeSnapshotID(r.GetSnapshot().GetSnapshotId()); mode != ModeZone || where != "z1" {
		t.Fatalf("a zonal volume's snapshot is kept in its zone: %v", r.GetSnapshot())
	}
	restored := f.create(fromSnapshot(createReq("restored", 8*Mi, nil, seg("z2", "n2"), seg("z1", "n1")),
		r.GetSnapshot().GetSnapshotId()))
	if restored.GetVolumeContext()[CtxZone] != "z1" || restored.GetVolumeContext()[CtxNodeSnapshot] != "" {
		t.Fatalf("restored: %v", restored)
	}
	checkData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", restored.GetVolumeId()), "zonal")
}
