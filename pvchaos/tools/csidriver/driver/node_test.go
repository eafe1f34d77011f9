package driver

// The node service with real bind mounts (root only): data written through the target
// lands in the backing directory, every step is idempotent, readonly holds, block
// publishes a loop device over the backing file (detached at unstage once no target
// holds it), and nothing stays mounted.

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func newTestNode(t *testing.T) (*Node, string) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log, _ := NewLogger("test", "")
	log.stderr = testWriter{t}
	t.Cleanup(func() {
		points, _ := MountPoints()
		for _, p := range points {
			if strings.HasPrefix(p, dir+"/") {
				t.Errorf("left mounted: %s", p)
				_ = UnmountAll(p)
			}
		}
	})
	return NewNode(NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1", DataRoot: filepath.Join(dir, "data")}, log), dir
}

func blockCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

func TestNodeMountLifecycle(t *testing.T) {
	n, dir := newTestNode(t)
	ctx := context.Background()
	vctx := map[string]string{CtxTopology: ModeNode, CtxNode: "n1"}
	staging, target, roTarget := filepath.Join(dir, "staging"), filepath.Join(dir, "pods", "t"), filepath.Join(dir, "pods", "ro")
	stage := &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, VolumeCapability: mountCap(snw), VolumeContext: vctx}
	for i := 0; i < 2; i++ {
		if _, err := n.NodeStageVolume(ctx, stage); err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	publish := &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap(snw), VolumeContext: vctx}
	for i := 0; i < 2; i++ {
		if _, err := n.NodePublishVolume(ctx, publish); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "data", "local", "v1", "hello")); err != nil || string(data) != "hi" {
		t.Fatalf("the write did not reach the node-local backing directory: %q %v", data, err)
	}
	ro := &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, TargetPath: roTarget, VolumeCapability: mountCap(snw), VolumeContext: vctx, Readonly: true}
	if _, err := n.NodePublishVolume(ctx, ro); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "nope"), nil, 0o644); err == nil {
		t.Fatal("a readonly publish is writable")
	}
	for _, tp := range []string{target, roTarget, target} { // the second unpublish of target is idempotent
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v1", TargetPath: tp}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tp); !os.IsNotExist(err) {
			t.Fatalf("target %s not removed: %v", tp, err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	if mounted, _ := IsMountPoint(staging); mounted {
		t.Fatal("staging still mounted")
	}
	// Another node's local volume is not here.
	other := &csi.NodeStageVolumeRequest{VolumeId: "v2", StagingTargetPath: staging, VolumeCapability: mountCap(snw),
		VolumeContext: map[string]string{CtxTopology: ModeNode, CtxNode: "n2"}}
	_, err := n.NodeStageVolume(ctx, other)
	wantCode(t, err, codes.FailedPrecondition, "n2")
}

func TestNodeBlockPublish(t *testing.T) {
	n, dir := newTestNode(t)
	if _, err := os.Stat(loopControl); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	ctx := context.Background()
	vctx := map[string]string{CtxTopology: ModeZone, CtxZone: "z1", CtxCapacity: "4194304"}
	staging, target, second := filepath.Join(dir, "staging"), filepath.Join(dir, "dev", "v1"), filepath.Join(dir, "dev", "v1-b")
	file := filepath.Join(dir, "data", "zone", "v1", "block")
	stage := &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, VolumeCapability: blockCap(snw), VolumeContext: vctx}
	for i := 0; i < 2; i++ { // the second stage finds the device the first attached
		if _, err := n.NodeStageVolume(ctx, stage); err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	dev, err := FindLoop(file)
	if err != nil || dev == "" {
		t.Fatalf("no loop device over %s after stage: %q %v", file, dev, err)
	}
	t.Cleanup(func() { _ = DetachLoop(dev) })
	names, _ := loopNames()
	attached := 0
	for _, name := range names {
		if backingFileOf(name) == file {
			attached++
		}
	}
	if attached != 1 {
		t.Fatalf("%d loop devices over %s after two stages, want 1", attached, file)
	}
	for _, tp := range []string{target, target, second} { // target twice: idempotent
		if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, TargetPath: tp, VolumeCapability: blockCap(snw), VolumeContext: vctx}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		t.Fatalf("block target is not a block device: %v %v", fi, err)
	}
	// bytes written to the device are the backing file's
	out, err := os.OpenFile(target, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.WriteAt([]byte("pvchaos-block"), 512); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	// growing: the backing file and the device the pod has both take the new size
	grow := &csi.NodeExpandVolumeRequest{VolumeId: "v1", VolumePath: target, VolumeCapability: blockCap(snw),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}}
	if got, err := n.NodeExpandVolume(ctx, grow); err != nil || got.GetCapacityBytes() != 8<<20 {
		t.Fatalf("NodeExpandVolume: %v %v", got, err)
	}
	if size := deviceSize(t, target); size != 8<<20 {
		t.Fatalf("the pod's device is %d bytes after growing to 8Mi", size)
	}
	if err := n.unpublish(ctx, second); err != nil {
		t.Fatal(err)
	}
	if point, err := DeviceMountedAt(dev); err != nil || point != target {
		t.Fatalf("%s should still be mounted at %s, is at %q (%v)", dev, target, point, err)
	}
	// unstage while a target still holds the device keeps it attached
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if still, _ := FindLoop(file); still != dev {
		t.Fatalf("unstage detached %s while it was mounted at %s", dev, target)
	}
	if err := n.unpublish(ctx, target); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage %d: %v", i, err)
		}
	}
	if still, err := FindLoop(file); err != nil || still != "" {
		t.Fatalf("loop device %q still over %s after unstage (%v)", still, file, err)
	}
	data, err := os.ReadFile(file)
	if err != nil || int64(len(data)) != 8*Mi || string(data[512:525]) != "pvchaos-block" { // grown above
		t.Fatalf("the backing file does not hold what was written to the device: %d bytes, %v", len(data), err)
	}
}

// The broken node plugin (--fault-block-file) publishes the backing file itself: a
// regular file, no loop device, which a container runtime refuses as a device.
func TestNodeBlockFileFault(t *testing.T) {
	n, dir := newTestNode(t)
	n.cfg.BlockFile = true
	ctx := context.Background()
	vctx := map[string]string{CtxTopology: ModeZone, CtxZone: "z1", CtxCapacity: "4194304"}
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "dev", "v1")
	if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap(snw), VolumeContext: vctx}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Size() != 4*Mi || !fi.Mode().IsRegular() {
		t.Fatalf("faulty block target: %v %v", fi, err)
	}
	if mounted, _ := IsMountPoint(target); !mounted {
		t.Fatal("block target not bind-mounted")
	}
	if dev, _ := FindLoop(filepath.Join(dir, "data", "zone", "v1", "block")); dev != "" {
		t.Fatalf("the faulty plugin attached %s", dev)
	}
	if err := n.unpublish(ctx, target); err != nil {
		t.Fatal(err)
	}
}

func TestNodeArgumentChecksAndRecordOnly(t *testing.T) {
	log, _ := NewLogger("test", "")
	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1"}, log) // no data root: calls are checked, nothing mounted
	ctx := context.Background()
	_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{StagingTargetPath: "/x", VolumeCapability: mountCap(snw)})
	wantCode(t, err, codes.InvalidArgument)
	_, err = n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/x", VolumeCapability: mountCap(snw)})
	wantCode(t, err, codes.FailedPrecondition, "staging")
	_, err = n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v"})
	wantCode(t, err, codes.InvalidArgument)
	if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/nonexistent/s", TargetPath: "/nonexistent/t", VolumeCapability: mountCap(snw)}); err != nil {
		t.Fatalf("record-only publish: %v", err)
	}
	if _, err := os.Stat("/nonexistent"); !os.IsNotExist(err) {
		t.Fatal("record-only mode touched the file system")
	}
	info, _ := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if info.GetAccessibleTopology().GetSegments()[HostnameKey] != "n1" {
		t.Fatalf("NodeGetInfo: %v", info)
	}
}

// A node plugin broken on purpose (--fault-no-topology) reports its id and limit but no
// accessible topology, so the kubelet registers the driver with no topology keys.
func TestNodeGetInfoWithoutTopology(t *testing.T) {
	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1", MaxVolumes: 3, NoTopology: true}, nil)
	info, err := n.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != "n1" || info.GetMaxVolumesPerNode() != 3 || info.GetAccessibleTopology() != nil {
		t.Fatalf("NodeGetInfo with NoTopology: %v, %v", info, err)
	}
}

func (n *Node) unpublish(ctx context.Context, target string) error {
	_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v1", TargetPath: target})
	return err
}

// A node about to be deleted with a block volume still staged gives its loop device back.
func TestReleaseLoops(t *testing.T) {
	n, dir := newTestNode(t)
	if _, err := os.Stat(loopControl); err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	vctx := map[string]string{CtxTopology: ModeNode, CtxNode: "n1", CtxCapacity: "1048576"}
	if _, err := n.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "v1",
		StagingTargetPath: filepath.Join(dir, "staging"), VolumeCapability: blockCap(snw), VolumeContext: vctx}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "data", "local", "v1", "block")
	released, err := ReleaseLoops(filepath.Join(dir, "data"))
	if err != nil || len(released) != 1 || !strings.Contains(released[0], file) {
		t.Fatalf("released %v, %v", released, err)
	}
	if dev, _ := FindLoop(file); dev != "" {
		t.Fatalf("%s still over %s", dev, file)
	}
}

func TestNodeFaultNoMountPublishesScratchNotTheVolume(t *testing.T) {
	n, dir := newTestNode(t)
	n.cfg.NoMount = true
	ctx := context.Background()
	// another node's local volume: a healthy plugin refuses to stage it; this one says OK
	vctx := map[string]string{CtxTopology: ModeNode, CtxNode: "n2"}
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pods", "t")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v1", StagingTargetPath: staging,
		VolumeCapability: mountCap(snw), VolumeContext: vctx}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	publish := &csi.NodePublishVolumeRequest{VolumeId: "v1", StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: mountCap(snw), VolumeContext: vctx}
	for round := 0; round < 2; round++ {
		if _, err := n.NodePublishVolume(ctx, publish); err != nil {
			t.Fatalf("publish %d: %v", round, err)
		}
		if _, err := os.Stat(filepath.Join(target, "hello")); !os.IsNotExist(err) {
			t.Fatalf("publish %d: the scratch directory is not new: %v", round, err)
		}
		if err := os.WriteFile(filepath.Join(target, "hello"), []byte("hi"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "data", "local", "v1")); !os.IsNotExist(err) {
			t.Fatalf("the volume's backing directory was made: %v", err)
		}
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "v1", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodeFaultIgnoreMountGroupAdvertisesIt(t *testing.T) {
	log, _ := NewLogger("test", "")
	has := func(n *Node) bool {
		resp, err := n.NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.GetCapabilities() {
			if c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP {
				return true
			}
		}
		return false
	}
	if has(NewNode(NodeConfig{NodeID: "n1"}, log)) {
		t.Fatal("a healthy node plugin advertises VOLUME_MOUNT_GROUP, which it does not apply")
	}
	if !has(NewNode(NodeConfig{NodeID: "n1", IgnoreMountGroup: true}, log)) {
		t.Fatal("--fault-ignore-mount-group does not advertise VOLUME_MOUNT_GROUP")
	}
}

// A volume's root keeps the mode a kubelet's fsGroup walk gave it when it is staged again
// (on this node or, for a zonal volume, another node of the zone): OnRootMismatch reads it.
func TestEnsureBackingKeepsAnExistingRootsMode(t *testing.T) {
	dir := t.TempDir()
	log, _ := NewLogger("test", "")
	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1", Zone: "z1", DataRoot: dir}, log)
	vctx := map[string]string{CtxTopology: ModeZone}
	root, err := n.ensureBacking("vol-1", vctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(root); st.Mode().Perm() != 0o777 {
		t.Fatalf("a new volume's root is %v, want rwxrwxrwx", st.Mode())
	}
	if err := os.Chmod(root, 0o777|os.ModeSetgid); err != nil { // what the kubelet's walk leaves
		t.Fatal(err)
	}
	if _, err := n.ensureBacking("vol-1", vctx, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(root); st.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("staging again reset the root to %v: the setgid bit of the fsGroup walk is gone", st.Mode())
	}
}

func deviceSize(t *testing.T, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	return size
}
