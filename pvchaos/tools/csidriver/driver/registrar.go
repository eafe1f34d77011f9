package driver

// The built-in node-driver-registrar: the kubelet's plugin watcher finds our socket in
// its plugins_registry directory, asks GetInfo, registers the CSI endpoint and tells us
// the outcome. A failed registration ends the process (Failed), so its supervisor
// restarts it and the kubelet tries again.

import (
	"context"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registrar implements the kubelet's Registration service.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	DriverName string
	Endpoint   string // the node's CSI socket path, as the kubelet must dial it
	Log        *Logger
	Failed     chan string // receives the kubelet's error when registration failed
}

func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: r.DriverName, Endpoint: r.Endpoint, SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *Registrar) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		r.Log.Eventf("kubelet registered driver %s at %s", r.DriverName, r.Endpoint)
	} else {
		r.Log.Eventf("kubelet failed to register driver %s at %s: %s", r.DriverName, r.Endpoint, st.GetError())
		select {
		case r.Failed <- st.GetError():
		default:
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
