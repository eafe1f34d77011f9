package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"pvchaos.dev/csidriver/driver"
)

// fakeController counts the calls that reached it: a fault that answers in place of the
// driver must leave it at zero, fail_reply must not.
type fakeController struct {
	csi.UnimplementedControllerServer
	publishes atomic.Int32
}

func (f *fakeController) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	f.publishes.Add(1)
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"k": "v"}}, nil
}

func (f *fakeController) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "v-" + r.GetName()}}, nil
}

type fixture struct {
	ctrl  *fakeController
	rules string
	log   string
	conn  *grpc.ClientConn
}

func start(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{ctrl: &fakeController{}, rules: filepath.Join(dir, "rules.json"), log: filepath.Join(dir, "calls.jsonl")}
	drv := grpc.NewServer()
	csi.RegisterIdentityServer(drv, &driver.Identity{Name: "fake.csi", Controller: true})
	csi.RegisterControllerServer(drv, f.ctrl)
	lis, err := driver.ListenUnix(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go drv.Serve(lis)
	t.Cleanup(drv.Stop)

	set, err := NewSet(f.rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(filepath.Join(dir, "d.sock"), set, f.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	srv := p.Server()
	plis, err := driver.ListenUnix(filepath.Join(dir, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(plis)
	t.Cleanup(srv.Stop)
	f.conn, err = grpc.NewClient("unix://"+filepath.Join(dir, "p.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.conn.Close() })
	return f
}

func (f *fixture) setRules(t *testing.T, rules ...Rule) {
	t.Helper()
	data, _ := json.Marshal(File{Rules: rules})
	tmp := f.rules + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.rules); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) publish(node string, timeout time.Duration) (codes.Code, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := csi.NewControllerClient(f.conn).ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: "vol-1", NodeId: node, Secrets: map[string]string{"password": "never logged"}})
	st := status.Convert(err)
	return st.Code(), st.Message()
}

func TestForwardsUnchangedWithoutRules(t *testing.T) {
	f := start(t)
	info, err := csi.NewIdentityClient(f.conn).GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "fake.csi" {
		t.Fatalf("GetPluginInfo through the proxy: %v %v", info, err)
	}
	if code, _ := f.publish("n1", 5*time.Second); code != codes.OK || f.ctrl.publishes.Load() != 1 {
		t.Fatalf("publish: %v, driver saw %d", code, f.ctrl.publishes.Load())
	}
	_, err = csi.NewNodeClient(f.conn).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("a method the driver lacks: %v, want the driver's Unimplemented", err)
	}
}

func TestErrorByNodeAndNth(t *testing.T) {
	f := start(t)
	f.setRules(t, Rule{Method: "/csi.v1.Controller/ControllerPublishVolume", NodeID: "n2", Action: ActionError,
		Code: "Internal", Message: "attach broken on n2"},
		Rule{Method: "ControllerPublishVolume", NodeID: "n3", Nth: 2, Action: ActionError, Code: "Aborted"})
	if code, msg := f.publish("n2", 5*time.Second); code != codes.Internal || msg != "attach broken on n2" {
		t.Fatalf("n2: %v %q", code, msg)
	}
	if code, _ := f.publish("n1", 5*time.Second); code != codes.OK {
		t.Fatalf("n1 is not selected: %v", code)
	}
	var got []codes.Code
	for i := 0; i < 3; i++ {
		c, _ := f.publish("n3", 5*time.Second)
		got = append(got, c)
	}
	if got[0] != codes.OK || got[1] != codes.Aborted || got[2] != codes.OK {
		t.Fatalf("nth=2 on n3: %v", got)
	}
	if n := f.ctrl.publishes.Load(); n != 3 {
		t.Fatalf("driver saw %d publishes, want 3 (n1, n3 first and third)", n)
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	count := func() int {
		f := start(t)
		f.setRules(t, Rule{Method: "ControllerPublishVolume", Probability: 0.5, Seed: 7, Action: ActionError, Code: "Unavailable"})
		failed := 0
		for i := 0; i < 40; i++ {
			if c, _ := f.publish("n1", 5*time.Second); c == codes.Unavailable {
				failed++
			}
		}
		return failed
	}
	a, b := count(), count()
	if a != b || a == 0 || a == 40 {
		t.Fatalf("seeded p=0.5 over 40 calls: %d then %d failures; want the same count, neither 0 nor 40", a, b)
	}
}

func TestDelayHangCloseFailReply(t *testing.T) {
	f := start(t)
	f.setRules(t, Rule{Method: "ControllerPublishVolume", NodeID: "slow", Action: ActionDelay, DelayMS: 300},
		Rule{Method: "ControllerPublishVolume", NodeID: "hang", Action: ActionHang},
		Rule{Method: "ControllerPublishVolume", NodeID: "close", Action: ActionClose},
		Rule{ID: "lost-reply", Method: "ControllerPublishVolume", NodeID: "lost", Action: ActionFailReply, Code: "DeadlineExceeded", Message: "reply lost"})
	t0 := time.Now()
	if c, _ := f.publish("slow", 5*time.Second); c != codes.OK || time.Since(t0) < 300*time.Millisecond {
		t.Fatalf("delay: %v after %v", c, time.Since(t0))
	}
	t0 = time.Now()
	if c, _ := f.publish("hang", 400*time.Millisecond); c != codes.DeadlineExceeded || time.Since(t0) < 400*time.Millisecond {
		t.Fatalf("hang: %v after %v, want DeadlineExceeded at the caller's deadline", c, time.Since(t0))
	}
	if c, _ := f.publish("close", 5*time.Second); c != codes.Unavailable {
		t.Fatalf("close: %v, want Unavailable", c)
	}
	if c, _ := f.publish("n1", 5*time.Second); c != codes.OK {
		t.Fatalf("after close, the caller reconnects: %v", c)
	}
	before := f.ctrl.publishes.Load()
	if c, msg := f.publish("lost", 5*time.Second); c != codes.DeadlineExceeded || msg != "reply lost" {
		t.Fatalf("fail_reply: %v %q", c, msg)
	}
	if f.ctrl.publishes.Load() != before+1 {
		t.Fatal("fail_reply: the driver never saw the call; the side effect must happen")
	}
	lines := readLog(t, f.log)
	last := lines[len(lines)-1]
	if last["rule"] != "lost-reply" || last["code"] != "DeadlineExceeded" || last["driver_ms"] == nil {
		t.Fatalf("last log line: %v", last)
	}
	req := last["request"].(map[string]any)
	if req["volume_id"] != "vol-1" || req["node_id"] != "lost" || req["secrets"] != nil {
		t.Fatalf("request summary %v: want volume and node ids, never secrets", req)
	}
}

func TestSegmentSelectsCreateVolume(t *testing.T) {
	f := start(t)
	f.setRules(t, Rule{Method: "CreateVolume", Segment: map[string]string{"kubernetes.io/hostname": "n2"},
		Action: ActionError, Code: "ResourceExhausted", Message: "n2 is full"})
	create := func(host string) codes.Code {
		_, err := csi.NewControllerClient(f.conn).CreateVolume(context.Background(), &csi.CreateVolumeRequest{
			Name: "pv-1", AccessibilityRequirements: &csi.TopologyRequirement{
				Preferred: []*csi.Topology{{Segments: map[string]string{"kubernetes.io/hostname": host}}}}})
		return status.Code(err)
	}
	if create("n2") != codes.ResourceExhausted || create("n1") != codes.OK {
		t.Fatal("segment selector: want n2 refused and n1 created")
	}
}

func TestRulesChangeWhileRunningAndABadFileKeepsThem(t *testing.T) {
	f := start(t)
	f.setRules(t, Rule{Method: "ControllerPublishVolume", Action: ActionError, Code: "Internal"})
	if c, _ := f.publish("n1", 5*time.Second); c != codes.Internal {
		t.Fatalf("first rules: %v", c)
	}
	time.Sleep(10 * time.Millisecond) // a new mtime even on coarse clocks; the size differs anyway
	if err := os.WriteFile(f.rules, []byte(`{"rules": [{"method": "X", "action": "explode"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.publish("n1", 5*time.Second); c != codes.Internal {
		t.Fatalf("a bad file must keep the rules in force: %v", c)
	}
	f.setRules(t)
	if c, _ := f.publish("n1", 5*time.Second); c != codes.OK {
		t.Fatalf("no rules: %v", c)
	}
}

func TestParseRefusesBadRules(t *testing.T) {
	for _, bad := range []string{
		`{"rules": [{"action": "error", "code": "Internal"}]}`,
		`{"rules": [{"method": "M", "action": "error", "code": "NoSuchCode"}]}`,
		`{"rules": [{"method": "M", "action": "error", "code": "OK"}]}`,
		`{"rules": [{"method": "M", "action": "delay"}]}`,
		`{"rules": [{"method": "M", "action": "hang", "probability": 2}]}`,
		`{"rules": [{"method": "M", "action": "hang", "volume": "typo"}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func readLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []map[string]any
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestACallWaitsForADriverThatStartsLater(t *testing.T) {
	dir := t.TempDir()
	set, _ := NewSet("", nil)
	p, err := New(filepath.Join(dir, "d.sock"), set, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := p.Server()
	plis, _ := driver.ListenUnix(filepath.Join(dir, "p.sock"))
	go srv.Serve(plis)
	defer srv.Stop()
	go func() {
		time.Sleep(300 * time.Millisecond)
		drv := grpc.NewServer()
		csi.RegisterIdentityServer(drv, &driver.Identity{Name: "late.csi"})
		lis, _ := driver.ListenUnix(filepath.Join(dir, "d.sock"))
		t.Cleanup(drv.Stop)
		drv.Serve(lis)
	}()
	conn, _ := grpc.NewClient("unix://"+filepath.Join(dir, "p.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "late.csi" {
		t.Fatalf("a call made before the driver listens: %v %v; want it answered once the driver is up", info, err)
	}
}

func TestSnapshotIDSelectsDeleteSnapshot(t *testing.T) {
	f := start(t)
	f.setRules(t, Rule{Method: "DeleteSnapshot", SnapshotID: "snap-2", Action: ActionError, Code: "Unavailable"})
	remove := func(id string) codes.Code {
		_, err := csi.NewControllerClient(f.conn).DeleteSnapshot(context.Background(),
			&csi.DeleteSnapshotRequest{SnapshotId: id})
		return status.Code(err)
	}
	// the fake driver has no DeleteSnapshot: a forwarded call is its Unimplemented
	if remove("snap-2") != codes.Unavailable || remove("snap-1") != codes.Unimplemented {
		t.Fatal("snapshot_id selector: want snap-2 refused by the rule and snap-1 forwarded")
	}
}
