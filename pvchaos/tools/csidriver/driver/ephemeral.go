package driver

// CSI inline ephemeral volumes (the CSIDriver's `Ephemeral` lifecycle mode, KEP-596): a
// pod's `volumes[].csi` source. No claim, no PV, no CreateVolume, no attach and no stage:
// the kubelet (pkg/volume/csi, v1.35) calls NodePublishVolume with a volume id of its own
// ("csi-" + sha256(pod UID + volume name)), no staging_target_path, the source's
// volumeAttributes as volume_context and, because our CSIDriver sets podInfoOnMount,
// "csi.storage.k8s.io/ephemeral": "true" with the pod's name, namespace and uid. The
// volume is a node-local directory made at publish and removed at unpublish.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// CtxEphemeral is what the kubelet adds to volume_context with podInfoOnMount: "true"
	// for an inline volume, "false" for a PV's.
	CtxEphemeral = "csi.storage.k8s.io/ephemeral"
	// AttrSize is an inline volume's size (a quantity): publish refuses it when the
	// node's data root has less free space (a reservation checked once, not a quota).
	AttrSize = ParamPrefix + "size"
)

// ephemeralID is the kubelet's form of an inline volume's id; anything else never names
// a directory under <data-root>/ephemeral (no path from a request reaches the disk).
var ephemeralID = regexp.MustCompile(`^csi-[0-9a-f]{64}$`)

// IsEphemeral: the kubelet says this NodePublishVolume is for an inline volume.
func IsEphemeral(vctx map[string]string) bool { return vctx[CtxEphemeral] == "true" }

// EphemeralAttrs is what an inline volume's volumeAttributes ask for.
type EphemeralAttrs struct {
	SizeBytes int64 // 0: no size asked
}

// ParseEphemeralAttrs checks every pvchaos.dev/ key (an unknown one is an error naming
// it, as class parameters are) and reads the size; the kubelet's csi.storage.k8s.io/
// keys and any other prefix are left alone.
func ParseEphemeralAttrs(vctx map[string]string) (EphemeralAttrs, error) {
	var a EphemeralAttrs
	for _, key := range sortedKeys(vctx) {
		if !strings.HasPrefix(key, ParamPrefix) {
			continue
		}
		if key != AttrSize {
			return a, fmt.Errorf("unknown volume attribute %q of an inline ephemeral volume (known: %s)", key, AttrSize)
		}
		n, err := ParseQuantity(vctx[key])
		if err != nil || n <= 0 {
			return a, fmt.Errorf("volume attribute %s=%q: want a positive quantity such as 64Mi", key, vctx[key])
		}
		a.SizeBytes = n
	}
	return a, nil
}

// ephemeralDir is where an inline volume's data lives on this node.
func (n *Node) ephemeralDir(id string) string { return filepath.Join(n.cfg.DataRoot, "ephemeral", id) }

// freeBytes is what an unprivileged writer may still put on the filesystem of path.
func freeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// publishEphemeral makes the inline volume's directory and binds it onto the target.
func (n *Node) publishEphemeral(req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, capability := req.GetVolumeId(), req.GetTargetPath(), req.GetVolumeCapability()
	if capability.GetBlock() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: an inline ephemeral volume is a directory; block access is not supported", id)
	}
	if why := CheckCapability(capability, ModeNode); why != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %s", id, why)
	}
	attrs, err := ParseEphemeralAttrs(req.GetVolumeContext())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %v", id, err)
	}
	if !ephemeralID.MatchString(id) {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: not the kubelet's id of an inline volume (csi-<sha256>)", id)
	}
	if n.cfg.DataRoot == "" {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if mounted, err := IsMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	} else if mounted {
		return &csi.NodePublishVolumeResponse{}, nil // published already: idempotent
	}
	dir := n.ephemeralDir(id)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && attrs.SizeBytes > 0 {
		free, err := freeBytes(filepath.Dir(dir))
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
		}
		if free < attrs.SizeBytes {
			return nil, status.Errorf(codes.ResourceExhausted, "volume %s node %s: %s=%d bytes, the node has %d free",
				id, n.cfg.NodeID, AttrSize, attrs.SizeBytes, free)
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	_ = os.Chmod(dir, 0o777)
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	if err := BindMount(dir, target, req.GetReadonly()); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s node %s: %v", id, n.cfg.NodeID, err)
	}
	n.log.Eventf("published inline ephemeral volume %s of pod %s/%s at %s (size %d, readonly=%v)", id,
		req.GetVolumeContext()["csi.storage.k8s.io/pod.namespace"], req.GetVolumeContext()["csi.storage.k8s.io/pod.name"],
		target, attrs.SizeBytes, req.GetReadonly())
	return &csi.NodePublishVolumeResponse{}, nil
}

// removeEphemeral deletes an inline volume's directory, if this id has one: its data
// goes with its pod.
func (n *Node) removeEphemeral(id string) error {
	if n.cfg.DataRoot == "" || !ephemeralID.MatchString(id) {
		return nil
	}
	dir := n.ephemeralDir(id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	n.log.Eventf("removed inline ephemeral volume %s", id)
	return nil
}
