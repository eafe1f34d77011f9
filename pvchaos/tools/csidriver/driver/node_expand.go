package driver

// NodeExpandVolume: the node's half of growing a block volume. The controller records the
// new size and asks for this step (node_expansion_required); here the sparse backing file
// grows and the loop device over it is told its new capacity (LOOP_SET_CAPACITY), so the
// pod's device really has the size the claim reports. A filesystem volume is a directory
// and needs no node step (the controller does not ask for one).

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeExpandVolume grows the block volume's backing file to the requested size (never
// shrinks it) and resizes its loop device when one is attached; for a mount volume it
// answers with the requested size, having nothing to grow. A volume without backing
// storage on this node, or a volume_path that does not exist, is NOT_FOUND (the spec's).
func (n *Node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if id == "" || path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id and volume_path are required")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s node %s: volume_path %s: %v", id, n.cfg.NodeID, path, err)
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	for _, mode := range []string{ModeZone, ModeNode} {
		dir := n.backingDir(id, map[string]string{CtxTopology: mode})
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if req.GetVolumeCapability().GetBlock() == nil {
			return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil // a directory: nothing to grow
		}
		return n.expandBlock(id, blockFile(dir), size)
	}
	return nil, status.Errorf(codes.NotFound, "volume %s node %s: no backing storage here", id, n.cfg.NodeID)
}

// expandBlock grows the backing file (never shrinks it) and resizes its loop device.
func (n *Node) expandBlock(id, file string, size int64) (*csi.NodeExpandVolumeResponse, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s node %s: block backing file: %v", id, n.cfg.NodeID, err)
	}
	if st.Size() < size {
		if err := os.Truncate(file, size); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s node %s: growing %s: %v", id, n.cfg.NodeID, file, err)
		}
	}
	dev, err := FindLoop(file)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: loop device of %s: %v", id, n.cfg.NodeID, file, err)
	}
	if dev != "" {
		if err := setLoopCapacity(dev); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s node %s: LOOP_SET_CAPACITY on %s: %v", id, n.cfg.NodeID, dev, err)
		}
	}
	n.log.Eventf("expanded block volume %s to %d bytes (%s, loop %q)", id, max(size, st.Size()), file, dev)
	return &csi.NodeExpandVolumeResponse{CapacityBytes: max(size, st.Size())}, nil
}

// setLoopCapacity makes the loop device re-read its backing file's size.
func setLoopCapacity(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0)
}
