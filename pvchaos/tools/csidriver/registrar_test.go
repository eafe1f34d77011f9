package main

// The registrar subcommand against a fake driver socket: it learns the name from
// GetPluginInfo, serves <dir>/<name>-reg.sock pointing the kubelet at the host path,
// and exits 1 with its socket removed when the kubelet reports a failed registration.
// And the in-cluster read of a Node's labels.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"pvchaos.dev/csidriver/driver"
)

func TestRegistrarFlags(t *testing.T) {
	if _, err := parseRegistrarFlags(nil); err == nil || !strings.Contains(err.Error(), "--kubelet-registration-path") {
		t.Fatalf("no registration path: %v", err)
	}
	if _, err := parseRegistrarFlags([]string{"--kubelet-registration-path", "relative.sock"}); err == nil {
		t.Fatal("a relative kubelet path: want an error")
	}
	o, err := parseRegistrarFlags([]string{"--csi-address", "unix:///csi/csi.sock", "--kubelet-registration-path",
		"/var/lib/kubelet/plugins/x/csi.sock"})
	if err != nil || o.csiAddress != "/csi/csi.sock" || o.pluginRegDir != "/registration" {
		t.Fatalf("%+v %v", o, err)
	}
}

func TestRegistrarRegistersTheDriverItAsks(t *testing.T) {
	dir := t.TempDir()
	drv := filepath.Join(dir, "csi", "csi.sock")
	lis, err := driver.ListenUnix(drv)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, &driver.Identity{Name: "vendor.example.com"})
	go srv.Serve(lis)
	defer srv.Stop()

	o, err := parseRegistrarFlags([]string{"--csi-address", drv, "--kubelet-registration-path",
		"/var/lib/kubelet/plugins/vendor.example.com/csi.sock", "--plugin-registration-path", filepath.Join(dir, "registry"),
		"--connection-timeout", "20s"})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() { exited <- runRegistrar(o) }()
	reg := filepath.Join(dir, "registry", "vendor.example.com-reg.sock")
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(reg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no registration socket named after the driver's answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+reg, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "vendor.example.com" ||
		info.GetEndpoint() != "/var/lib/kubelet/plugins/vendor.example.com/csi.sock" {
		t.Fatalf("GetInfo: %v", info)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "no"}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 1 {
			t.Fatalf("exit %d after a failed registration, want 1", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running after a failed registration")
	}
	if _, err := os.Stat(reg); !os.IsNotExist(err) {
		t.Errorf("%s left behind (%v)", reg, err)
	}
}

func TestRegistrarGivesUpOnASilentDriver(t *testing.T) {
	dir := t.TempDir()
	o, err := parseRegistrarFlags([]string{"--csi-address", filepath.Join(dir, "none.sock"), "--kubelet-registration-path",
		"/var/lib/kubelet/plugins/x/csi.sock", "--plugin-registration-path", dir, "--connection-timeout", "1500ms",
		"--timeout", "200ms"})
	if err != nil {
		t.Fatal(err)
	}
	if code := runRegistrar(o); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
}

func TestTopologyFromNodeLabels(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/api/v1/nodes/zone-b-1" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"labels": map[string]string{
			"topology.kubernetes.io/zone": "zone-b", "kubernetes.io/hostname": "zone-b-1"}}})
	}))
	defer api.Close()
	sa := t.TempDir()
	os.WriteFile(filepath.Join(sa, "token"), []byte("tok\n"), 0o600)
	os.WriteFile(filepath.Join(sa, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o600)
	host, port, _ := strings.Cut(strings.TrimPrefix(api.URL, "https://"), ":")
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	client, err := inClusterClient(sa)
	if err != nil {
		t.Fatal(err)
	}
	say := func(string, ...any) {}
	got, err := topologyFromNode(context.Background(), client, "zone-b-1", []string{"topology.kubernetes.io/zone"}, 5*time.Second, say)
	if err != nil || got["topology.kubernetes.io/zone"] != "zone-b" || len(got) != 1 {
		t.Fatalf("labels: %v %v", got, err)
	}
	start := time.Now()
	_, err = topologyFromNode(context.Background(), client, "zone-b-1", []string{"vendor.example.com/rack"}, 30*time.Second, say)
	if err == nil || !strings.Contains(err.Error(), "vendor.example.com/rack") || time.Since(start) > 5*time.Second {
		t.Fatalf("a label the node lacks is final at once: %v", err)
	}
	_, err = topologyFromNode(context.Background(), client, "other", []string{"topology.kubernetes.io/zone"}, 3*time.Second, say)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a refused read, after the bound: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := inClusterClient(sa); err == nil {
		t.Fatal("outside a cluster: want an error")
	}
}

func TestNodeFlagsForLabelTopology(t *testing.T) {
	o, err := parseFlags("node", []string{"--endpoint", "unix:///x.sock", "--node-id", "n1",
		"--topology-from-node-labels", "topology.kubernetes.io/zone, topology.kubernetes.io/region"})
	if err != nil || len(o.topologyLabels) != 2 || o.nodeKey != "kubernetes.io/hostname" {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parseFlags("node", []string{"--endpoint", "unix:///x.sock", "--node-id", "n1", "--zone", "z",
		"--topology-from-node-labels", "topology.kubernetes.io/zone"}); err == nil {
		t.Fatal("--zone and the zone label together: want an error")
	}
	o, err = parseFlags("controller", []string{"--endpoint", "unix:///x.sock", "--state-file", "s",
		"--node-topology-key", "vendor.example.com/node", "--fault-attach-limit", "2"})
	if err != nil || o.nodeKey != "vendor.example.com/node" || o.faultAttachMax != 2 {
		t.Fatalf("%+v %v", o, err)
	}
}
