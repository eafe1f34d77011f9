package driver

// The identity service, served on every endpoint.

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Version is the driver's vendor_version.
const Version = "0.1.0"

// Identity implements csi.IdentityServer.
type Identity struct {
	csi.UnimplementedIdentityServer
	Name       string
	Controller bool // whether this endpoint serves the controller service
}

func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.Name, VendorVersion: Version}, nil
}

// GetPluginCapabilities: topology always (volumes are zonal or node-local), the
// controller service only where it is served.
func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	out := &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
	}}
	if i.Controller {
		out.Capabilities = append(out.Capabilities, svc(csi.PluginCapability_Service_CONTROLLER_SERVICE))
	}
	return out, nil
}

// Probe: the driver has no backend to lose, so it is ready whenever it answers.
func (i *Identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
