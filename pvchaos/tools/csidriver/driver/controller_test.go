package driver

// The controller in process: the rules end to end through the RPCs, and a restart (a new
// Controller on the same state file) keeping volumes, attachments and knob counters.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type fixture struct {
	t   *testing.T
	cfg ControllerConfig
	c   *Controller
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	f := &fixture{t: t, cfg: ControllerConfig{
		StateFile: filepath.Join(dir, "state.json"), DataRoot: filepath.Join(dir, "data"), ControlDir: filepath.Join(dir, "control"),
	}}
	f.restart()
	return f
}

func (f *fixture) restart() {
	log, err := NewLogger("test", "")
	if err != nil {
		f.t.Fatal(err)
	}
	log.stderr = testWriter{f.t}
	if f.c, err = NewController(f.cfg, log); err != nil {
		f.t.Fatal(err)
	}
	f.c.sleep = func(context.Context, time.Duration) {}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (f *fixture) capacity(json string) {
	os.MkdirAll(f.cfg.ControlDir, 0o755)
	if err := os.WriteFile(filepath.Join(f.cfg.ControlDir, "capacity.json"), []byte(json), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func mountCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

func createReq(name string, bytes int64, params map[string]string, selected Segment, requisite ...Segment) *csi.CreateVolumeRequest {
	req := &csi.CreateVolumeRequest{
		Name: name, Parameters: params, VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
		CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
	}
	if selected != nil {
		req.AccessibilityRequirements = &csi.TopologyRequirement{
			Requisite: toTopology(append([]Segment{selected}, requisite...), ""),
			Preferred: toTopology(append([]Segment{selected}, requisite...), ""),
		}
	}
	return req
}

func wantCode(t *testing.T, err error, want codes.Code, msgParts ...string) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
	for _, p := range msgParts {
		if !strings.Contains(status.Convert(err).Message(), p) {
			t.Fatalf("message %q lacks %q", status.Convert(err).Message(), p)
		}
	}
}

func TestCreateIdempotentAndConflicts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r1, err := f.c.CreateVolume(ctx, createReq("pvc-1", 3*Mi+1, nil, seg("z1", "n1")))
	if err != nil {
		t.Fatal(err)
	}
	v := r1.GetVolume()
	if v.GetCapacityBytes() != 4*Mi || v.GetVolumeContext()[CtxZone] != "z1" || v.GetVolumeContext()[CtxTopology] != ModeZone ||
		len(v.GetAccessibleTopology()) != 1 || v.GetAccessibleTopology()[0].GetSegments()[ZoneKey] != "z1" {
		t.Fatalf("volume: %v", v)
	}
	if fi, err := os.Stat(filepath.Join(f.cfg.DataRoot, "zones", "z1", v.GetVolumeId())); err != nil || !fi.IsDir() {
		t.Fatalf("zonal volume directory: %v", err)
	}
	r2, err := f.c.CreateVolume(ctx, createReq("pvc-1", 3*Mi+1, nil, seg("z1", "n1")))
	if err != nil || r2.GetVolume().GetVolumeId() != v.GetVolumeId() {
		t.Fatalf("repeat: %v %v", r2, err)
	}
	_, err = f.c.CreateVolume(ctx, createReq("pvc-1", 8*Mi, nil, seg("z1", "n1")))
	wantCode(t, err, codes.AlreadyExists)
	_, err = f.c.CreateVolume(ctx, createReq("pvc-1", Mi, map[string]string{ParamTopology: ModeNode}, seg("z1", "n1")))
	wantCode(t, err, codes.AlreadyExists)
	_, err = f.c.CreateVolume(ctx, createReq("pvc-1", Mi, nil, seg("z2", "n2")))
	wantCode(t, err, codes.AlreadyExists, "requisite")
	_, err = f.c.CreateVolume(ctx, createReq("pvc-x", Mi, map[string]string{"pvchaos.dev/topolgy": "zone"}, nil))
	wantCode(t, err, codes.InvalidArgument, "pvchaos.dev/topolgy")
	_, err = f.c.CreateVolume(ctx, createReq("pvc-x", Mi, map[string]string{ParamTopology: ModeNode}, nil))
	wantCode(t, err, codes.InvalidArgument)
	_, err = f.c.CreateVolume(ctx, createReq("pvc-x", Mi, nil, seg("", "n1")))
	wantCode(t, err, codes.ResourceExhausted)
	big := createReq("pvc-x", 2*Mi, nil, nil)
	big.CapacityRange.LimitBytes = Mi
	_, err = f.c.CreateVolume(ctx, big)
	wantCode(t, err, codes.OutOfRange)
	multi := createReq("pvc-x", Mi, map[string]string{ParamTopology: ModeNode}, seg("z1", "n1"))
	multi.VolumeCapabilities = []*csi.VolumeCapability{mountCap(mnm)}
	_, err = f.c.CreateVolume(ctx, multi)
	wantCode(t, err, codes.InvalidArgument)
}

func TestCapacityPerZone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.capacity(`{"z1": "10Mi"}`)
	if _, err := f.c.CreateVolume(ctx, createReq("a", 6*Mi, nil, seg("z1", "n1"))); err != nil {
		t.Fatal(err)
	}
	_, err := f.c.CreateVolume(ctx, createReq("b", 6*Mi, nil, seg("z1", "n1")))
	wantCode(t, err, codes.ResourceExhausted, `zone "z1"`, "4194304 bytes free", "10485760")
	if _, err := f.c.CreateVolume(ctx, createReq("b", 6*Mi, nil, seg("z2", "n2"))); err != nil {
		t.Fatalf("z2 is unlimited: %v", err)
	}
	gc, err := f.c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: seg("z1", "n1")}})
	if err != nil || gc.GetAvailableCapacity() != 4*Mi || gc.GetMaximumVolumeSize().GetValue() != 4*Mi {
		t.Fatalf("GetCapacity z1: %v %v", gc, err)
	}
	// A hostname-only segment: the zone learnt for n1 from the requirements above.
	gc, _ = f.c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: seg("", "n1")}})
	if gc.GetAvailableCapacity() != 4*Mi {
		t.Fatalf("GetCapacity n1: %v", gc)
	}
	gc, _ = f.c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: seg("", "unknown")}})
	if gc.GetAvailableCapacity() != Unlimited {
		t.Fatalf("GetCapacity unknown node: %v", gc)
	}
	f.capacity(`{"z1": "20Mi"}`) // read on every call
	if _, err := f.c.CreateVolume(ctx, createReq("c", 6*Mi, nil, seg("z1", "n1"))); err != nil {
		t.Fatalf("after raising z1: %v", err)
	}
}

func TestPublishRulesAndRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	local, err := f.c.CreateVolume(ctx, createReq("local", Mi, map[string]string{ParamTopology: ModeNode}, seg("z1", "n1"), seg("z1", "n2")))
	if err != nil {
		t.Fatal(err)
	}
	lv := local.GetVolume()
	if lv.GetVolumeContext()[CtxNode] != "n1" || len(lv.GetAccessibleTopology()[0].GetSegments()) != 1 {
		t.Fatalf("node-local volume: %v", lv)
	}
	pub := func(id, node string) error {
		_, err := f.c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: mountCap(snw)})
		return err
	}
	wantCode(t, pub(lv.GetVolumeId(), "n2"), codes.FailedPrecondition, "local to node n1")
	if err := pub(lv.GetVolumeId(), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := pub(lv.GetVolumeId(), "n1"); err != nil {
		t.Fatalf("idempotent publish: %v", err)
	}
	wantCode(t, pub("no-such-volume", "n1"), codes.NotFound)
	_, err = f.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: lv.GetVolumeId()})
	wantCode(t, err, codes.FailedPrecondition, "n1")

	f.restart()
	list, err := f.c.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil || len(list.GetEntries()) != 1 || list.GetEntries()[0].GetStatus().GetPublishedNodeIds()[0] != "n1" {
		t.Fatalf("after restart: %v %v", list, err)
	}
	if _, err := f.c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: lv.GetVolumeId(), NodeId: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "gone", NodeId: "n1"}); err != nil {
		t.Fatalf("unknown volume unpublish is OK: %v", err)
	}
	if _, err := f.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: lv.GetVolumeId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: lv.GetVolumeId()}); err != nil {
		t.Fatalf("repeat delete is OK: %v", err)
	}
}

func TestKnobThroughCreateVolume(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	params := map[string]string{keyFirstNode: "true", keyCode: "Unavailable", keyReason: "first node unlucky"}
	_, err := f.c.CreateVolume(ctx, createReq("pvc-k", Mi, params, seg("z1", "n1"), seg("z2", "n2")))
	wantCode(t, err, codes.Unavailable, "first node unlucky", `"n1"`)
	_, err = f.c.CreateVolume(ctx, createReq("pvc-k", Mi, params, seg("z1", "n1"), seg("z2", "n2")))
	wantCode(t, err, codes.Unavailable, "failure 2")
	r, err := f.c.CreateVolume(ctx, createReq("pvc-k", Mi, params, seg("z2", "n2"), seg("z1", "n1")))
	if err != nil || r.GetVolume().GetVolumeContext()[CtxZone] != "z2" {
		t.Fatalf("second node: %v %v", r, err)
	}
	data, _ := os.ReadFile(f.cfg.StateFile)
	if strings.Contains(string(data), "fail-") {
		t.Fatalf("knob keys reached the state file:\n%s", data)
	}

	// fail-times counts across a crash: the counter is in the state file.
	crash := map[string]string{keyTimes: "1", keyAction: "crash"}
	exited := 0
	f.c.exit = func(int) { exited++ }
	_, err = f.c.CreateVolume(ctx, createReq("pvc-c", Mi, crash, seg("z1", "n1")))
	if exited != 1 || err == nil {
		t.Fatalf("crash: exited %d, %v", exited, err)
	}
	f.restart()
	if _, err := f.c.CreateVolume(ctx, createReq("pvc-c", Mi, crash, seg("z1", "n1"))); err != nil {
		t.Fatalf("after the crash, fail-times=1 is used up: %v", err)
	}
}

func TestListVolumesPaging(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		if _, err := f.c.CreateVolume(ctx, createReq(n, Mi, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	token := ""
	for {
		page, err := f.c.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token, MaxEntries: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.GetEntries() {
			seen[e.GetVolume().GetVolumeId()] = true
		}
		if token = page.GetNextToken(); token == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Fatalf("paged through %d volumes, want 3", len(seen))
	}
	_, err := f.c.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
}
