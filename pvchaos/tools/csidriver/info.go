package main

// `pvchaos-csi info --endpoint unix:///path/csi.sock`: a CSI client, not a driver. It asks
// whatever plugin serves the socket who it is (Identity.GetPluginInfo), what it offers
// (GetPluginCapabilities) and, when the socket serves the node service, NodeGetInfo; and
// prints one JSON line. `pvchaos certify` copies this static binary into a kind node and
// runs it against a vendor's node plugin socket: the driver's name and version come from
// the driver itself, not from a label someone wrote beside it.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"pvchaos.dev/csidriver/driver"
)

// pluginReport is the JSON line `info` prints. Name and VendorVersion are GetPluginInfo's;
// Node is NodeGetInfo's answer, absent when the endpoint serves no node service (its
// error, other than Unimplemented, is in NodeError).
type pluginReport struct {
	Endpoint      string            `json:"endpoint"`
	Name          string            `json:"name"`
	VendorVersion string            `json:"vendor_version"`
	Manifest      map[string]string `json:"manifest,omitempty"`
	Capabilities  []string          `json:"capabilities"`
	// NodeGetCapabilities and ControllerGetCapabilities, where the socket serves them
	// (a node plugin, a controller, or one process serving both: distributed provisioning)
	NodeCapabilities       []string    `json:"node_capabilities,omitempty"`
	ControllerCapabilities []string    `json:"controller_capabilities,omitempty"`
	Node                   *nodeReport `json:"node,omitempty"`
	NodeError              string      `json:"node_error,omitempty"`
}

type nodeReport struct {
	NodeID             string            `json:"node_id"`
	MaxVolumesPerNode  int64             `json:"max_volumes_per_node"`
	AccessibleTopology map[string]string `json:"accessible_topology,omitempty"`
}

type infoOptions struct {
	endpoint string
	timeout  time.Duration
}

func parseInfoFlags(args []string) (infoOptions, error) {
	o := infoOptions{}
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.endpoint, "endpoint", "", "unix:///path.sock of the CSI plugin to ask")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on the whole conversation")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if o.endpoint == "" {
		return o, errors.New("missing --endpoint")
	}
	if o.timeout <= 0 {
		return o, errors.New("--timeout must be > 0")
	}
	if _, err := driver.SocketPath(o.endpoint); err != nil {
		return o, err
	}
	return o, nil
}

// askPlugin has the conversation over conn. GetPluginInfo must answer with a name (the
// spec requires one); capabilities and the node service are best effort.
func askPlugin(ctx context.Context, conn grpc.ClientConnInterface, endpoint string) (pluginReport, error) {
	out := pluginReport{Endpoint: endpoint, Capabilities: []string{}}
	id := csi.NewIdentityClient(conn)
	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return out, fmt.Errorf("GetPluginInfo: %w", err)
	}
	if info.GetName() == "" {
		return out, errors.New("GetPluginInfo: empty name (the spec requires one)")
	}
	out.Name, out.VendorVersion, out.Manifest = info.GetName(), info.GetVendorVersion(), info.GetManifest()
	if caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{}); err == nil {
		for _, c := range caps.GetCapabilities() {
			switch {
			case c.GetService() != nil:
				out.Capabilities = append(out.Capabilities, c.GetService().GetType().String())
			case c.GetVolumeExpansion() != nil:
				out.Capabilities = append(out.Capabilities, "VOLUME_EXPANSION_"+c.GetVolumeExpansion().GetType().String())
			}
		}
		sort.Strings(out.Capabilities)
	}
	if caps, err := csi.NewNodeClient(conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{}); err == nil {
		for _, c := range caps.GetCapabilities() {
			out.NodeCapabilities = append(out.NodeCapabilities, c.GetRpc().GetType().String())
		}
		sort.Strings(out.NodeCapabilities)
	}
	if caps, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx,
		&csi.ControllerGetCapabilitiesRequest{}); err == nil {
		for _, c := range caps.GetCapabilities() {
			out.ControllerCapabilities = append(out.ControllerCapabilities, c.GetRpc().GetType().String())
		}
		sort.Strings(out.ControllerCapabilities)
	}
	node, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	switch {
	case err == nil:
		out.Node = &nodeReport{NodeID: node.GetNodeId(), MaxVolumesPerNode: node.GetMaxVolumesPerNode(),
			AccessibleTopology: node.GetAccessibleTopology().GetSegments()}
	case status.Code(err) != codes.Unimplemented:
		out.NodeError = err.Error()
	}
	return out, nil
}

// runInfo is the subcommand: one JSON line on stdout and exit 0, or one line on stderr
// and exit 1.
func runInfo(o infoOptions, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	path, _ := driver.SocketPath(o.endpoint) // checked by parseInfoFlags
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "pvchaos-csi info: %s: %v\n", o.endpoint, err)
		return 1
	}
	defer conn.Close()
	report, err := askPlugin(ctx, conn, o.endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "pvchaos-csi info: %s: %v\n", o.endpoint, err)
		return 1
	}
	line, err := json.Marshal(report)
	if err != nil {
		fmt.Fprintf(stderr, "pvchaos-csi info: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, string(line))
	return 0
}

func infoMain(args []string) int {
	o, err := parseInfoFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Println(usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pvchaos-csi info: %v\n", err)
		return 2
	}
	return runInfo(o, os.Stdout, os.Stderr)
}
