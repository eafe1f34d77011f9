package driver

// Logging: one stderr line per event, and the calls log, one JSON line per RPC, which the
// harness attaches to test reports (so it is flat and names what the call was about, and
// never carries secrets: only the fields picked below are written).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Logger writes both.
type Logger struct {
	mu     sync.Mutex
	stderr io.Writer
	calls  *os.File // nil: no calls log
	role   string
}

// NewLogger opens (appends to) the calls log; "" means none.
func NewLogger(role, callsLog string) (*Logger, error) {
	l := &Logger{stderr: os.Stderr, role: role}
	if callsLog != "" {
		f, err := os.OpenFile(callsLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("calls log: %v", err)
		}
		l.calls = f
	}
	return l, nil
}

// Close closes the calls log.
func (l *Logger) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls != nil {
		_ = l.calls.Close()
		l.calls = nil
	}
}

// Eventf writes one stderr line.
func (l *Logger) Eventf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.stderr, "%s pvchaos-csi %s: %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), l.role, strings.ReplaceAll(line, "\n", " "))
}

type callRecord struct {
	Time       string         `json:"time"`
	Service    string         `json:"service"`
	Method     string         `json:"method"`
	Request    map[string]any `json:"request"`
	Code       string         `json:"code"`
	Message    string         `json:"message"`
	DurationMS float64        `json:"duration_ms"`
	Response   map[string]any `json:"response,omitempty"`
}

// Call appends one calls-log line. code is a gRPC code name ("OK", "NotFound", ...).
func (l *Logger) Call(service, method string, req map[string]any, code, message string, d time.Duration, resp map[string]any) {
	rec := callRecord{
		Time: time.Now().UTC().Format(time.RFC3339Nano), Service: service, Method: method, Request: req,
		Code: code, Message: message, DurationMS: math.Round(float64(d.Microseconds())) / 1000, Response: resp,
	}
	data, err := json.Marshal(rec)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"method": method, "error": err.Error()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls != nil {
		_, _ = l.calls.Write(append(data, '\n')) // O_APPEND: one write, one whole line
	}
}

// Interceptor records every unary RPC, and logs failures to stderr as well.
func (l *Logger) Interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		service, method := splitMethod(info.FullMethod)
		st := status.Convert(err)
		var summary map[string]any
		if err == nil {
			summary = responseSummary(resp)
		} else {
			l.Eventf("%s/%s failed: %s: %s", service, method, st.Code(), st.Message())
		}
		l.Call(service, method, requestSummary(req), st.Code().String(), st.Message(), time.Since(start), summary)
		return resp, err
	}
}

// splitMethod turns "/csi.v1.Controller/CreateVolume" into ("Controller", "CreateVolume").
func splitMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	svc, method, _ := strings.Cut(full, "/")
	if i := strings.LastIndex(svc, "."); i >= 0 {
		svc = svc[i+1:]
	}
	return svc, method
}

func topologyList(ts []*csi.Topology) []map[string]string {
	out := []map[string]string{}
	for _, t := range ts {
		out = append(out, t.GetSegments())
	}
	return out
}

// requestSummary picks the fields worth reading from any request, by the getters the
// generated types share; secrets have getters too and are never asked for.
func requestSummary(req any) map[string]any {
	m := map[string]any{}
	str := func(key, v string) {
		if v != "" {
			m[key] = v
		}
	}
	if r, ok := req.(interface{ GetName() string }); ok {
		str("name", r.GetName())
	}
	if r, ok := req.(interface{ GetVolumeId() string }); ok {
		str("volume_id", r.GetVolumeId())
	}
	if r, ok := req.(interface{ GetSourceVolumeId() string }); ok {
		str("source_volume_id", r.GetSourceVolumeId())
	}
	if r, ok := req.(interface{ GetSnapshotId() string }); ok {
		str("snapshot_id", r.GetSnapshotId())
	}
	if r, ok := req.(interface {
		GetVolumeContentSource() *csi.VolumeContentSource
	}); ok && r.GetVolumeContentSource() != nil {
		m["volume_content_source"] = contentSourceSummary(r.GetVolumeContentSource())
	}
	if r, ok := req.(interface{ GetNodeId() string }); ok {
		str("node_id", r.GetNodeId())
	}
	if r, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		str("staging_target_path", r.GetStagingTargetPath())
	}
	if r, ok := req.(interface{ GetTargetPath() string }); ok {
		str("target_path", r.GetTargetPath())
	}
	if r, ok := req.(interface{ GetReadonly() bool }); ok && r.GetReadonly() {
		m["readonly"] = true
	}
	if r, ok := req.(interface{ GetCapacityRange() *csi.CapacityRange }); ok && r.GetCapacityRange() != nil {
		m["capacity"] = map[string]int64{"required_bytes": r.GetCapacityRange().GetRequiredBytes(), "limit_bytes": r.GetCapacityRange().GetLimitBytes()}
	}
	if r, ok := req.(interface{ GetParameters() map[string]string }); ok && len(r.GetParameters()) > 0 {
		m["parameters"] = r.GetParameters()
	}
	if r, ok := req.(interface{ GetMutableParameters() map[string]string }); ok && len(r.GetMutableParameters()) > 0 {
		m["mutable_parameters"] = r.GetMutableParameters()
	}
	if r, ok := req.(interface {
		GetAccessibilityRequirements() *csi.TopologyRequirement
	}); ok && r.GetAccessibilityRequirements() != nil {
		m["accessibility_requirements"] = map[string]any{
			"requisite": topologyList(r.GetAccessibilityRequirements().GetRequisite()),
			"preferred": topologyList(r.GetAccessibilityRequirements().GetPreferred()),
		}
	}
	if r, ok := req.(interface{ GetAccessibleTopology() *csi.Topology }); ok && r.GetAccessibleTopology() != nil {
		m["accessible_topology"] = r.GetAccessibleTopology().GetSegments()
	}
	if r, ok := req.(interface{ GetVolumeContext() map[string]string }); ok && len(r.GetVolumeContext()) > 0 {
		m["volume_context"] = r.GetVolumeContext()
	}
	if r, ok := req.(interface{ GetPublishContext() map[string]string }); ok && len(r.GetPublishContext()) > 0 {
		m["publish_context"] = r.GetPublishContext()
	}
	if r, ok := req.(interface {
		GetVolumeCapabilities() []*csi.VolumeCapability
	}); ok && len(r.GetVolumeCapabilities()) > 0 {
		m["volume_capabilities"] = describeCaps(r.GetVolumeCapabilities())
	}
	if r, ok := req.(interface{ GetVolumeCapability() *csi.VolumeCapability }); ok && r.GetVolumeCapability() != nil {
		m["volume_capability"] = describeCaps([]*csi.VolumeCapability{r.GetVolumeCapability()})
	}
	if r, ok := req.(interface{ GetStartingToken() string }); ok {
		str("starting_token", r.GetStartingToken())
	}
	if r, ok := req.(interface{ GetMaxEntries() int32 }); ok && r.GetMaxEntries() != 0 {
		m["max_entries"] = r.GetMaxEntries()
	}
	if r, ok := req.(interface {
		GetPluginRegistered() bool
		GetError() string
	}); ok { // the kubelet's NotifyRegistrationStatus
		m["plugin_registered"] = r.GetPluginRegistered()
		str("error", r.GetError())
	}
	return m
}

func contentSourceSummary(src *csi.VolumeContentSource) map[string]string {
	return map[string]string{"snapshot_id": src.GetSnapshot().GetSnapshotId(), "volume_id": src.GetVolume().GetVolumeId()}
}

// responseSummary: the volume, its topology, capacity and publish context, node info.
func responseSummary(resp any) map[string]any {
	m := map[string]any{}
	switch r := resp.(type) {
	case *csi.CreateVolumeResponse:
		m["volume_id"] = r.GetVolume().GetVolumeId()
		m["capacity_bytes"] = r.GetVolume().GetCapacityBytes()
		m["accessible_topology"] = topologyList(r.GetVolume().GetAccessibleTopology())
		m["volume_context"] = r.GetVolume().GetVolumeContext()
		if src := r.GetVolume().GetContentSource(); src != nil {
			m["content_source"] = contentSourceSummary(src)
		}
	case *csi.CreateSnapshotResponse:
		m["snapshot_id"] = r.GetSnapshot().GetSnapshotId()
		m["size_bytes"] = r.GetSnapshot().GetSizeBytes()
		m["ready_to_use"] = r.GetSnapshot().GetReadyToUse()
	case *csi.ListSnapshotsResponse:
		m["entries"] = len(r.GetEntries())
		if r.GetNextToken() != "" {
			m["next_token"] = r.GetNextToken()
		}
	case *csi.ControllerPublishVolumeResponse:
		m["publish_context"] = r.GetPublishContext()
	case *csi.ControllerExpandVolumeResponse:
		m["capacity_bytes"] = r.GetCapacityBytes()
		m["node_expansion_required"] = r.GetNodeExpansionRequired()
	case *csi.GetCapacityResponse:
		m["available_capacity"] = r.GetAvailableCapacity()
		if r.GetMaximumVolumeSize() != nil {
			m["maximum_volume_size"] = r.GetMaximumVolumeSize().GetValue()
		}
	case *csi.ListVolumesResponse:
		m["entries"] = len(r.GetEntries())
		if r.GetNextToken() != "" {
			m["next_token"] = r.GetNextToken()
		}
	case *csi.NodeGetInfoResponse:
		m["node_id"] = r.GetNodeId()
		m["max_volumes_per_node"] = r.GetMaxVolumesPerNode()
		m["accessible_topology"] = r.GetAccessibleTopology().GetSegments()
	case *csi.ValidateVolumeCapabilitiesResponse:
		m["confirmed"] = r.GetConfirmed() != nil
		if r.GetMessage() != "" {
			m["message"] = r.GetMessage()
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// RequestSummary is requestSummary for the fault proxy, which decodes requests it only
// forwards and logs them the way the driver does.
func RequestSummary(req any) map[string]any { return requestSummary(req) }
