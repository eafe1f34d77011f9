package driver

// Inline ephemeral volumes as the kubelet asks for them: NodePublishVolume with no staging
// path and csi.storage.k8s.io/ephemeral=true, a directory of their own, gone at unpublish.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// kubeletID is pkg/volume/csi's makeVolumeHandle: the id an inline volume gets.
func kubeletID(podUID, volume string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volume)))
}

func inlineContext(extra map[string]string) map[string]string {
	vctx := map[string]string{CtxEphemeral: "true", "csi.storage.k8s.io/pod.name": "app",
		"csi.storage.k8s.io/pod.namespace": "ns", "csi.storage.k8s.io/pod.uid": "uid-1"}
	for k, v := range extra {
		vctx[k] = v
	}
	return vctx
}

func TestParseEphemeralAttrs(t *testing.T) {
	if a, err := ParseEphemeralAttrs(inlineContext(map[string]string{AttrSize: "64Mi", "other.example/x": "y"})); err != nil || a.SizeBytes != 64<<20 {
		t.Fatalf("size 64Mi: %+v %v", a, err)
	}
	if a, err := ParseEphemeralAttrs(inlineContext(nil)); err != nil || a.SizeBytes != 0 {
		t.Fatalf("no attributes: %+v %v", a, err)
	}
	for _, bad := range []map[string]string{{ParamPrefix + "topology": "node"}, {ParamPrefix + "fail-times": "1"}, {AttrSize: "big"}, {AttrSize: "0"}} {
		if _, err := ParseEphemeralAttrs(inlineContext(bad)); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

func TestInlineVolumeLifecycle(t *testing.T) {
	n, dir := newTestNode(t)
	ctx := context.Background()
	id := kubeletID("uid-1", "scratch")
	target := filepath.Join(dir, "pods", "uid-1", "volumes", "kubernetes.io~csi", "scratch", "mount")
	publish := &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: mountCap(snw),
		VolumeContext: inlineContext(map[string]string{AttrSize: "1Mi"})}
	for i := 0; i < 2; i++ { // the second is the idempotent repeat
		if _, err := n.NodePublishVolume(ctx, publish); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(dir, "data", "ephemeral", id)
	if data, err := os.ReadFile(filepath.Join(backing, "hello")); err != nil || string(data) != "hi" {
		t.Fatalf("the write did not reach the inline volume's directory: %q %v", data, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("unpublish %d: %v", i, err)
		}
	}
	for _, gone := range []string{target, backing} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there after unpublish: %v", gone, err)
		}
	}
}

func TestInlineVolumeRefusals(t *testing.T) {
	n, dir := newTestNode(t)
	ctx := context.Background()
	id := kubeletID("uid-2", "scratch")
	target := filepath.Join(dir, "pods", "t")
	call := func(vctx map[string]string, c *csi.VolumeCapability, volumeID string) error {
		_, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: volumeID, TargetPath: target, VolumeCapability: c, VolumeContext: vctx})
		return err
	}
	cases := []struct {
		name string
		err  error
		code codes.Code
		word string
	}{
		{"unknown pvchaos.dev/ attribute", call(inlineContext(map[string]string{ParamPrefix + "colour": "red"}), mountCap(snw), id), codes.InvalidArgument, "colour"},
		{"block", call(inlineContext(nil), blockCap(snw), id), codes.InvalidArgument, "block"},
		{"multi-node access", call(inlineContext(nil), mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), id), codes.InvalidArgument, "node"},
		{"more than the node has", call(inlineContext(map[string]string{AttrSize: "1000Pi"}), mountCap(snw), id), codes.ResourceExhausted, "free"},
		{"an id that is no kubelet's", call(inlineContext(nil), mountCap(snw), "../escape"), codes.InvalidArgument, "csi-<sha256>"},
		// without podInfoOnMount the kubelet sends no marker: a publish without staging
		{"no ephemeral marker", call(map[string]string{}, mountCap(snw), id), codes.FailedPrecondition, "podInfoOnMount"},
	}
	for _, c := range cases {
		if status.Code(c.err) != c.code || !strings.Contains(status.Convert(c.err).Message(), c.word) {
			t.Errorf("%s: got %v, want %s naming %q", c.name, c.err, c.code, c.word)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "ephemeral", id)); !os.IsNotExist(err) {
		t.Errorf("a refused publish left its directory: %v", err)
	}
}

func TestInlineVolumeWithoutDataRoot(t *testing.T) {
	log, _ := NewLogger("test", "")
	log.stderr = testWriter{t}
	n := NewNode(NodeConfig{NodeID: "n1", Hostname: "n1"}, log) // the local backend's KWOK nodes: calls checked only
	id := kubeletID("uid-3", "scratch")
	req := &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: "/nonexistent/t", VolumeCapability: mountCap(snw), VolumeContext: inlineContext(nil)}
	if _, err := n.NodePublishVolume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	bad := &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: "/nonexistent/t", VolumeCapability: mountCap(snw),
		VolumeContext: inlineContext(map[string]string{ParamPrefix + "colour": "red"})}
	if _, err := n.NodePublishVolume(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an unknown attribute is refused without a data root too: %v", err)
	}
}
