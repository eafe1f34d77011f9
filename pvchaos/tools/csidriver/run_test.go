package main

// The process around the services: the built-in registrar answers the kubelet's
// GetInfo, and a failed registration ends the process non-zero with its sockets removed.

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func TestRegistrationFailureExitsAndRemovesSockets(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags("node", []string{
		"--endpoint", "unix://" + filepath.Join(dir, "plugins", "csi.sock"), "--driver-name", "csi.pvchaos.dev",
		"--node-id", "n1", "--zone", "z1", "--max-volumes-per-node", "3", "--calls-log", filepath.Join(dir, "calls.jsonl"),
		"--registration-dir", filepath.Join(dir, "registry"),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "registry", "csi.pvchaos.dev-reg.sock")
	os.MkdirAll(filepath.Dir(reg), 0o755)
	os.WriteFile(reg, nil, 0o644) // not a socket: run must refuse to remove it
	if code := run(o); code != 1 {
		t.Fatalf("a non-socket in the way: exit %d, want 1", code)
	}
	os.Remove(reg)

	exited := make(chan int, 1)
	go func() { exited <- run(o) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(reg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no registration socket")
		}
		time.Sleep(10 * time.Millisecond)
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
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "csi.pvchaos.dev" ||
		info.GetEndpoint() != filepath.Join(dir, "plugins", "csi.sock") || info.GetSupportedVersions()[0] != "1.0.0" {
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
	for _, p := range []string{reg, filepath.Join(dir, "plugins", "csi.sock")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
	if len(calls) == 0 {
		t.Error("the registration calls were not logged")
	}
}

func TestFlagsUnionAndRequired(t *testing.T) {
	if _, err := parseFlags("controller", []string{"--endpoint", "unix:///x.sock"}); err == nil {
		t.Error("controller without --state-file: want an error")
	}
	if _, err := parseFlags("controller", []string{"--endpoint", "unix:///x.sock", "--state-file", "s", "--node-id", "n"}); err == nil {
		t.Error("controller takes no --node-id")
	}
	o, err := parseFlags("all", []string{"--endpoint", "unix:///x.sock", "--state-file", "s", "--node-id", "n1", "--control-dir", "c"})
	if err != nil || o.hostname != "n1" || !filepath.IsAbs(o.stateFile) || !o.snapshots {
		t.Errorf("all: %+v %v", o, err)
	}
	if o, err := parseFlags("controller", []string{"--endpoint", "unix:///x.sock", "--state-file", "s", "--snapshots=false"}); err != nil || o.snapshots {
		t.Errorf("--snapshots=false: %+v %v", o, err)
	}
	o, err = parseFlags("node", []string{"--endpoint", "unix:///p/driver.sock", "--node-id", "n1",
		"--kubelet-endpoint", "unix:///p/csi.sock"})
	if err != nil || o.kubeletEndpoint != "unix:///p/csi.sock" {
		t.Errorf("node --kubelet-endpoint (a fault proxy in front): %+v %v", o, err)
	}
	if _, err := parseFlags("all", []string{"--endpoint", "unix:///x.sock", "--state-file", "s", "--node-id", "n1",
		"--kubelet-endpoint", "unix:///y.sock"}); err == nil {
		t.Error("all registers with no kubelet: --kubelet-endpoint is the node mode's only")
	}
}
