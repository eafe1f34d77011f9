package driver

// Snapshots, restores and clones through the RPCs: real bytes copied, the source's
// topology kept, the spec's error codes, and a restart keeping the snapshots.

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

var nodeLocal = map[string]string{ParamTopology: ModeNode}

func (f *fixture) create(req *csi.CreateVolumeRequest) *csi.Volume {
	f.t.Helper()
	r, err := f.c.CreateVolume(context.Background(), req)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.GetVolume()
}

func (f *fixture) snapshot(name, source string) *csi.Snapshot {
	f.t.Helper()
	r, err := f.c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.GetSnapshot()
}

func fromSnapshot(req *csi.CreateVolumeRequest, id string) *csi.CreateVolumeRequest {
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
	return req
}

func fromVolume(req *csi.CreateVolumeRequest, id string) *csi.CreateVolumeRequest {
	req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
	return req
}

// writeData puts a file, a subdirectory, a symlink and a sparse 64 MiB block file with
// one written MiB into dir.
func writeData(t *testing.T, dir, text string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "data.txt"), []byte(text), 0o640))
	_ = os.Remove(filepath.Join(dir, "link"))
	must(t, os.Symlink("sub/data.txt", filepath.Join(dir, "link")))
	f, err := os.OpenFile(blockFile(dir), os.O_CREATE|os.O_RDWR, 0o666)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(64*Mi))
	chunk := make([]byte, Mi)
	copy(chunk, text)
	_, err = f.WriteAt(chunk, 32*Mi)
	must(t, err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkData asserts dir holds what writeData(text) wrote, the block file still sparse.
func checkData(t *testing.T, dir, text string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, "link"))
	if err != nil || string(got) != text {
		t.Fatalf("%s/link = %q %v, want %q", dir, got, err, text)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sub", "data.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("file mode: %v %v", fi, err)
	}
	f, err := os.Open(blockFile(dir))
	must(t, err)
	defer f.Close()
	fi, err := f.Stat()
	must(t, err)
	if fi.Size() != 64*Mi {
		t.Fatalf("block file size %d", fi.Size())
	}
	if blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 8*Mi {
		t.Errorf("block file copied densely: %d bytes allocated", blocks)
	}
	head := make([]byte, len(text))
	_, err = f.ReadAt(head, 32*Mi)
	if err != nil || string(head) != text {
		t.Fatalf("block file at 32Mi = %q %v", head, err)
	}
}

func TestSnapshotRestoreCopiesBytesAndKeepsTheZone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src := f.create(createReq("src", 8*Mi, nil, seg("z1", "n1")))
	srcDir := filepath.Join(f.cfg.DataRoot, "zones", "z1", src.GetVolumeId())
	writeData(t, srcDir, "before")

	snap := f.snapshot("snap-1", src.GetVolumeId())
	if !snap.GetReadyToUse() || snap.GetSizeBytes() != 8*Mi || snap.GetSourceVolumeId() != src.GetVolumeId() ||
		snap.GetCreationTime() == nil {
		t.Fatalf("snapshot: %v", snap)
	}
	if again := f.snapshot("snap-1", src.GetVolumeId()); again.GetSnapshotId() != snap.GetSnapshotId() {
		t.Fatalf("idempotent by name: %v", again)
	}
	writeData(t, srcDir, "after!") // the snapshot keeps the bytes of its time

	// Restored for a node of any zone the requisite allows: it stays in z1.
	restored := f.create(fromSnapshot(createReq("restored", 0, nil, seg("z2", "n2"), seg("z1", "n1")), snap.GetSnapshotId()))
	if restored.GetCapacityBytes() != 8*Mi || restored.GetVolumeContext()[CtxZone] != "z1" ||
		restored.GetAccessibleTopology()[0].GetSegments()[ZoneKey] != "z1" ||
		restored.GetContentSource().GetSnapshot().GetSnapshotId() != snap.GetSnapshotId() {
		t.Fatalf("restored: %v", restored)
	}
	checkData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", restored.GetVolumeId()), "before")

	clone := f.create(fromVolume(createReq("clone", 16*Mi, nil, seg("z1", "n1")), src.GetVolumeId()))
	if clone.GetCapacityBytes() != 16*Mi || clone.GetContentSource().GetVolume().GetVolumeId() != src.GetVolumeId() {
		t.Fatalf("clone: %v", clone)
	}
	checkData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", clone.GetVolumeId()), "after!")

	// Idempotent by name with the same source; another source is ALREADY_EXISTS.
	again, err := f.c.CreateVolume(ctx, fromVolume(createReq("clone", 16*Mi, nil, seg("z1", "n1")), src.GetVolumeId()))
	if err != nil || again.GetVolume().GetVolumeId() != clone.GetVolumeId() {
		t.Fatalf("repeated clone: %v %v", again, err)
	}
	_, err = f.c.CreateVolume(ctx, fromSnapshot(createReq("clone", 16*Mi, nil, seg("z1", "n1")), snap.GetSnapshotId()))
	wantCode(t, err, codes.AlreadyExists, "content source")
	_, err = f.c.CreateVolume(ctx, createReq("clone", 16*Mi, nil, seg("z1", "n1")))
	wantCode(t, err, codes.AlreadyExists, "content source")

	// The snapshot outlives its source, and a restart.
	_, err = f.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: src.GetVolumeId()})
	must(t, err)
	f.restart()
	later := f.create(fromSnapshot(createReq("later", 8*Mi, nil, seg("z1", "n1")), snap.GetSnapshotId()))
	checkData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", later.GetVolumeId()), "before")

	snapDir := filepath.Join(f.cfg.DataRoot, "snapshots", snap.GetSnapshotId())
	if _, err := os.Stat(snapDir); err != nil {
		t.Fatalf("snapshot store: %v", err)
	}
	for range 2 { // idempotent
		_, err = f.c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
		must(t, err)
	}
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Fatalf("snapshot directory stays after DeleteSnapshot: %v", err)
	}
	checkData(t, filepath.Join(f.cfg.DataRoot, "zones", "z1", later.GetVolumeId()), "before") // a copy, not a link
	f.restart()
	if len(f.c.st.Snapshots) != 0 {
		t.Fatalf("deleted snapshot back after restart: %v", f.c.st.Snapshots)
	}
}

func TestSnapshotAndSourceErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src := f.create(createReq("src", 8*Mi, nil, seg("z1", "n1")))
	other := f.create(createReq("other", Mi, nil, seg("z1", "n1")))
	snap := f.snapshot("snap", src.GetVolumeId())

	cases := []struct {
		name string
		req  *csi.CreateSnapshotRequest
		code codes.Code
		msg  string
	}{
		{"no name", &csi.CreateSnapshotRequest{SourceVolumeId: src.GetVolumeId()}, codes.InvalidArgument, "name"},
		{"no source", &csi.CreateSnapshotRequest{Name: "s"}, codes.InvalidArgument, "source_volume_id"},
		{"unknown source", &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "pvchaos-nope"}, codes.NotFound, "pvchaos-nope"},
		{"name taken by another source", &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: other.GetVolumeId()}, codes.AlreadyExists, src.GetVolumeId()},
		{"driver key", &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: src.GetVolumeId(),
			Parameters: map[string]string{ParamTopology: ModeNode}}, codes.InvalidArgument, ParamTopology},
	}
	for _, c := range cases {
		_, err := f.c.CreateSnapshot(ctx, c.req)
		t.Run(c.name, func(t *testing.T) { wantCode(t, err, c.code, c.msg) })
	}
	_, err := f.c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "pvchaos-snap-unknown"})
	must(t, err)

	limited := createReq("small", 4*Mi, nil, seg("z1", "n1"))
	limited.CapacityRange.LimitBytes = 4 * Mi
	restores := []struct {
		name string
		req  *csi.CreateVolumeRequest
		code codes.Code
		msg  string
	}{
		{"unknown snapshot", fromSnapshot(createReq("r", Mi, nil, nil), "pvchaos-snap-nope"), codes.NotFound, "pvchaos-snap-nope"},
		{"unknown volume", fromVolume(createReq("r", Mi, nil, nil), "pvchaos-nope"), codes.NotFound, "pvchaos-nope"},
		{"empty source", &csi.CreateVolumeRequest{Name: "r", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
			VolumeContentSource: &csi.VolumeContentSource{}}, codes.InvalidArgument, "neither"},
		{"smaller than the source", fromSnapshot(limited, snap.GetSnapshotId()), codes.OutOfRange, "smaller than the source"},
		{"requisite excludes the source's zone", fromSnapshot(createReq("r", 8*Mi, nil, seg("z2", "n2")), snap.GetSnapshotId()),
			codes.ResourceExhausted, `zone "z1"`},
		{"clone into another zone", fromVolume(createReq("r", 8*Mi, nil, seg("z2", "n2")), src.GetVolumeId()),
			codes.ResourceExhausted, `zone "z1"`},
		{"another mode", fromSnapshot(createReq("r", 8*Mi, nodeLocal, seg("z1", "n1")), snap.GetSnapshotId()),
			codes.InvalidArgument, "topology mode"},
	}
	for _, c := range restores {
		_, err := f.c.CreateVolume(ctx, c.req)
		t.Run(c.name, func(t *testing.T) { wantCode(t, err, c.code, c.msg) })
	}
	if n := len(f.c.st.Volumes); n != 2 {
		t.Fatalf("failed restores left volumes: %d", n)
	}
	// required_bytes below the source's size is a minimum: the copy gets the source's size.
	grown := f.create(fromSnapshot(createReq("grown", 2*Mi, nil, seg("z1", "n1")), snap.GetSnapshotId()))
	if grown.GetCapacityBytes() != 8*Mi {
		t.Fatalf("grown: %v", grown)
	}
}

func TestNodeLocalCopiesStayOnTheirNode(t *testing.T) {
	f := newFixture(t)
	f.cfg.NodeDataRoot = f.cfg.DataRoot // `pvchaos-csi all`: the node's directories are ours
	f.restart()
	ctx := context.Background()
	// Before any node directory exists: an unconstrained zonal volume, cloned and restored.
	free := f.create(createReq("free", Mi, nil, nil))
	f.create(fromVolume(createReq("free-clone", Mi, nil, nil), free.GetVolumeId()))
	f.create(fromSnapshot(createReq("free-restored", Mi, nil, nil), f.snapshot("free-snap", free.GetVolumeId()).GetSnapshotId()))
	// A zonal volume's bytes are where the node service writes them, not the zone's directory.
	zonal := f.create(createReq("zonal", Mi, nil, seg("z1", "n1")))
	writeData(t, filepath.Join(f.cfg.DataRoot, "zone", zonal.GetVolumeId()), "zonal")
	copied := f.create(fromSnapshot(createReq("zonal-restored", Mi, nil, seg("z1", "n1")), f.snapshot("zonal-snap", zonal.GetVolumeId()).GetSnapshotId()))
	checkData(t, filepath.Join(f.cfg.DataRoot, "zone", copied.GetVolumeId()), "zonal")

	src := f.create(createReq("src", 8*Mi, nodeLocal, seg("z1", "n1"), seg("z1", "n2")))
	writeData(t, filepath.Join(f.cfg.DataRoot, "local", src.GetVolumeId()), "local")
	snap := f.snapshot("snap", src.GetVolumeId())

	// The selected node n2 comes first in preferred; the copy still goes to n1.
	restored := f.create(fromSnapshot(createReq("restored", 8*Mi, nodeLocal, seg("z1", "n2"), seg("z1", "n1")), snap.GetSnapshotId()))
	if restored.GetAccessibleTopology()[0].GetSegments()[HostnameKey] != "n1" || restored.GetVolumeContext()[CtxZone] != "z1" {
		t.Fatalf("restored: %v", restored)
	}
	checkData(t, filepath.Join(f.cfg.DataRoot, "local", restored.GetVolumeId()), "local")
	clone := f.create(fromVolume(createReq("clone", 8*Mi, nodeLocal, seg("z1", "n1")), src.GetVolumeId()))
	checkData(t, filepath.Join(f.cfg.DataRoot, "local", clone.GetVolumeId()), "local")
	_, err := f.c.CreateVolume(ctx, fromSnapshot(createReq("r", 8*Mi, nodeLocal, seg("z1", "n2")), snap.GetSnapshotId()))
	wantCode(t, err, codes.ResourceExhausted, `node "n1"`)

	// A standalone controller cannot reach a node's directory: it says so, copies nothing.
	f.cfg.NodeDataRoot = ""
	f.restart()
	_, err = f.c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-2", SourceVolumeId: src.GetVolumeId()})
	wantCode(t, err, codes.FailedPrecondition, "only `pvchaos-csi all`")
	_, err = f.c.CreateVolume(ctx, fromVolume(createReq("clone-2", 8*Mi, nodeLocal, seg("z1", "n1")), src.GetVolumeId()))
	wantCode(t, err, codes.InvalidArgument, "only `pvchaos-csi all`")
}

func TestSnapshotsWithoutDataRoot(t *testing.T) {
	f := newFixture(t)
	f.cfg.DataRoot = "" // the KWOK backend: no volume has bytes, nor does a snapshot
	f.restart()
	src := f.create(createReq("src", 8*Mi, nodeLocal, seg("z1", "n1")))
	snap := f.snapshot("snap", src.GetVolumeId())
	if f.c.st.Snapshots[snap.GetSnapshotId()].Dir != "" {
		t.Fatal("a snapshot directory without --data-root")
	}
	restored := f.create(fromSnapshot(createReq("r", 8*Mi, nodeLocal, seg("z1", "n1")), snap.GetSnapshotId()))
	if restored.GetAccessibleTopology()[0].GetSegments()[HostnameKey] != "n1" {
		t.Fatalf("restored: %v", restored)
	}
}

func TestListSnapshots(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var want []string
	bySource := map[string]string{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		v := f.create(createReq("vol-"+name, Mi, nil, seg("z1", "n1")))
		s := f.snapshot("snap-"+name, v.GetVolumeId())
		want = append(want, s.GetSnapshotId())
		bySource[v.GetVolumeId()] = s.GetSnapshotId()
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		r, err := f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 2, StartingToken: token})
		must(t, err)
		if len(r.GetEntries()) > 2 || pages > 3 {
			t.Fatalf("page %d: %v", pages, r)
		}
		for _, e := range r.GetEntries() {
			got = append(got, e.GetSnapshot().GetSnapshotId())
		}
		if token = r.GetNextToken(); token == "" {
			break
		}
	}
	if !reflect.DeepEqual(got, sortedKeys(f.c.st.Snapshots)) || len(got) != len(want) {
		t.Fatalf("pages joined = %v, want all of %v", got, want)
	}
	for source, id := range bySource {
		r, err := f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: source})
		if err != nil || len(r.GetEntries()) != 1 || r.GetEntries()[0].GetSnapshot().GetSnapshotId() != id {
			t.Fatalf("by source %s: %v %v", source, r, err)
		}
		r, err = f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: id})
		if err != nil || len(r.GetEntries()) != 1 || r.GetEntries()[0].GetSnapshot().GetSourceVolumeId() != source {
			t.Fatalf("by id %s: %v %v", id, r, err)
		}
		r, err = f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: id, SourceVolumeId: "pvchaos-other"})
		if err != nil || len(r.GetEntries()) != 0 {
			t.Fatalf("by id and another source: %v %v", r, err)
		}
	}
	for _, req := range []*csi.ListSnapshotsRequest{{SnapshotId: "pvchaos-snap-nope"}, {SourceVolumeId: "pvchaos-nope"}} {
		if r, err := f.c.ListSnapshots(ctx, req); err != nil || len(r.GetEntries()) != 0 {
			t.Fatalf("%v: %v %v", req, r, err)
		}
	}
	_, err := f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
	_, err = f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestCopyTreeOfAMissingSourceIsEmpty(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "copy")
	must(t, CopyTree(filepath.Join(t.TempDir(), "never-staged"), dst))
	entries, err := os.ReadDir(dst)
	if err != nil || len(entries) != 0 {
		t.Fatalf("copy of a missing directory: %v %v", entries, err)
	}
	if CopyTree(t.TempDir(), dst) == nil {
		t.Fatal("copying onto an existing directory must fail, not merge")
	}
}

func TestSnapshotsOff(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	caps := func() map[string]bool {
		r, err := f.c.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		must(t, err)
		out := map[string]bool{}
		for _, c := range r.GetCapabilities() {
			out[c.GetRpc().GetType().String()] = true
		}
		return out
	}
	if on := caps(); !on["CREATE_DELETE_SNAPSHOT"] || !on["LIST_SNAPSHOTS"] || !on["CLONE_VOLUME"] || !on["CREATE_DELETE_VOLUME"] {
		t.Fatalf("default capabilities: %v", on)
	}
	src := f.create(createReq("src", Mi, nil, seg("z1", "n1")))
	f.cfg.NoSnapshots = true
	f.restart()
	if off := caps(); off["CREATE_DELETE_SNAPSHOT"] || off["LIST_SNAPSHOTS"] || off["CLONE_VOLUME"] || !off["CREATE_DELETE_VOLUME"] {
		t.Fatalf("--snapshots=false capabilities: %v", off)
	}
	_, err := f.c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: src.GetVolumeId()})
	wantCode(t, err, codes.Unimplemented)
	_, err = f.c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	wantCode(t, err, codes.Unimplemented)
	_, err = f.c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "x"})
	wantCode(t, err, codes.Unimplemented)
	_, err = f.c.CreateVolume(ctx, fromVolume(createReq("c", Mi, nil, seg("z1", "n1")), src.GetVolumeId()))
	wantCode(t, err, codes.InvalidArgument, "not supported")
}
