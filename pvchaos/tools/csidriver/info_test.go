package main

// `info` against real sockets: the driver's own node endpoint answers name, version,
// capabilities and NodeGetInfo; a controller-only endpoint has no node section and no
// error; a server that is not a CSI plugin is refused in one line; bad flags exit 2.

import (
	"bytes"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"pvchaos.dev/csidriver/driver"
)

// serve starts a gRPC server on a temporary socket with what register puts on it.
func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

func info(t *testing.T, endpoint string) (pluginReport, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runInfo(infoOptions{endpoint: endpoint, timeout: 5 * time.Second}, &out, &errOut)
	var rep pluginReport
	if code == 0 {
		if strings.Count(out.String(), "\n") != 1 {
			t.Fatalf("want one JSON line, got %q", out.String())
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("not JSON: %q: %v", out.String(), err)
		}
	}
	return rep, errOut.String(), code
}

func TestInfoOfANodePlugin(t *testing.T) {
	log, _ := driver.NewLogger("node", "")
	ep := serve(t, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, &driver.Identity{Name: "vendor.example.com"})
		csi.RegisterNodeServer(s, driver.NewNode(driver.NodeConfig{NodeID: "zone-a-1", Zone: "zone-a",
			Hostname: "zone-a-1", MaxVolumes: 20}, log))
	})
	rep, stderr, code := info(t, ep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep.Name != "vendor.example.com" || rep.VendorVersion != driver.Version || rep.Endpoint != ep {
		t.Fatalf("identity: %+v", rep)
	}
	if len(rep.Capabilities) != 1 || rep.Capabilities[0] != "VOLUME_ACCESSIBILITY_CONSTRAINTS" {
		t.Fatalf("capabilities: %v", rep.Capabilities)
	}
	if rep.Node == nil || rep.Node.NodeID != "zone-a-1" || rep.Node.MaxVolumesPerNode != 20 ||
		rep.Node.AccessibleTopology[driver.ZoneKey] != "zone-a" || rep.NodeError != "" {
		t.Fatalf("node: %+v (%s)", rep.Node, rep.NodeError)
	}
	if len(rep.NodeCapabilities) == 0 || len(rep.ControllerCapabilities) != 0 {
		t.Fatalf("a node plugin answers NodeGetCapabilities and no controller's: %v %v", rep.NodeCapabilities,
			rep.ControllerCapabilities)
	}
}

func TestInfoOfAControllerOnlyEndpoint(t *testing.T) {
	ep := serve(t, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, &driver.Identity{Name: "vendor.example.com", Controller: true})
	})
	rep, stderr, code := info(t, ep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep.Node != nil || rep.NodeError != "" {
		t.Fatalf("no node service (Unimplemented) must leave node and node_error out: %+v", rep)
	}
	if strings.Join(rep.Capabilities, ",") != "CONTROLLER_SERVICE,VOLUME_ACCESSIBILITY_CONSTRAINTS" {
		t.Fatalf("capabilities: %v", rep.Capabilities)
	}
}

func TestInfoRefusesWhatIsNoPlugin(t *testing.T) {
	ep := serve(t, func(*grpc.Server) {}) // a gRPC server without the identity service
	_, stderr, code := info(t, ep)
	if code != 1 || !strings.HasPrefix(stderr, "pvchaos-csi info: "+ep+": GetPluginInfo:") ||
		strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	nobody := "unix://" + filepath.Join(t.TempDir(), "absent.sock")
	if _, stderr, code := info(t, nobody); code != 1 || !strings.Contains(stderr, "GetPluginInfo") {
		t.Fatalf("no socket: exit %d, stderr %q", code, stderr)
	}
}

func TestInfoFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--endpoint", "tcp://x:1"}, {"--endpoint", "unix://relative.sock"},
		{"--endpoint", "unix:///a.sock", "extra"}, {"--endpoint", "unix:///a.sock", "--timeout", "0s"}} {
		if _, err := parseInfoFlags(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	o, err := parseInfoFlags([]string{"--endpoint", "unix:///var/lib/kubelet/plugins/x/csi.sock"})
	if err != nil || o.timeout != 10*time.Second {
		t.Fatalf("%+v %v", o, err)
	}
}
