package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"pvchaos.dev/csidriver/driver"
)

// frame is one gRPC message as bytes: the proxy forwards what it received.
type frame struct{ data []byte }

// rawCodec passes frames through. Named "proto" so the content type stays the one
// every CSI client and server speaks.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*frame).data)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*frame).data = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// connCreds hands each call its caller's connection (through peer.AuthInfo), so the
// "close" action closes exactly that one. No security: unix sockets, as CSI uses them.
type connCreds struct{}

type connInfo struct {
	credentials.CommonAuthInfo
	conn net.Conn
}

func (connInfo) AuthType() string { return "pvchaos-csi-proxy" }

func (connCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, connInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, c}, nil
}

func (connCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, connInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, c}, nil
}
func (connCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}
func (c connCreds) Clone() credentials.TransportCredentials { return c }
func (connCreds) OverrideServerName(string) error           { return nil }

// Proxy forwards calls to one target socket.
type Proxy struct {
	target *grpc.ClientConn
	rules  *Set
	logMu  sync.Mutex
	log    *os.File // nil: no log
}

// New dials the target lazily (a driver that starts after the proxy is fine) and opens
// the log (appending). A driver that restarts is dialled again within a second (gRPC's
// default back-off grows to two minutes, far longer than a restart takes).
func New(targetSocket string, rules *Set, logPath string) (*Proxy, error) {
	conn, err := grpc.NewClient("unix://"+targetSocket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second, Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("target %s: %v", targetSocket, err)
	}
	p := &Proxy{target: conn, rules: rules}
	if logPath != "" {
		if p.log, err = os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			conn.Close()
			return nil, fmt.Errorf("log: %v", err)
		}
	}
	return p, nil
}

// Server is a gRPC server that proxies every method, registered or not.
func (p *Proxy) Server() *grpc.Server {
	return grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.Creds(connCreds{}),
		grpc.UnknownServiceHandler(p.handle))
}

// Close closes the target connection and the log.
func (p *Proxy) Close() {
	_ = p.target.Close()
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if p.log != nil {
		_ = p.log.Close()
		p.log = nil
	}
}

// handle serves one call. CSI is unary only; a streaming call gets its first message
// forwarded and its first reply back, which is all a unary call has.
func (p *Proxy) handle(_ any, stream grpc.ServerStream) error {
	start := time.Now()
	method, _ := grpc.MethodFromServerStream(stream)
	var req frame
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	ctx := stream.Context()
	call, summary := Decode(method, req.data)
	rule := p.rules.Match(call)
	var resp frame
	var driverTime time.Duration
	forward := func() error {
		t := time.Now()
		// WaitForReady: while the driver's socket is not up yet (the stack starting) or
		// again (a restart), the call waits for it within the caller's deadline, as a
		// client dialling the driver directly waits for its socket.
		err := p.target.Invoke(outgoing(ctx), method, &req, &resp, grpc.ForceCodecV2(rawCodec{}), grpc.WaitForReady(true))
		driverTime = time.Since(t)
		return err
	}
	var err error
	switch {
	case rule == nil:
		err = forward()
	case rule.Action == ActionError:
		err = rule.status()
	case rule.Action == ActionDelay:
		select {
		case <-time.After(rule.Delay()):
			err = forward()
		case <-ctx.Done():
			err = status.FromContextError(ctx.Err()).Err()
		}
	case rule.Action == ActionHang:
		<-ctx.Done()
		err = status.FromContextError(ctx.Err()).Err()
	case rule.Action == ActionClose:
		if pr, ok := peer.FromContext(ctx); ok {
			if info, ok := pr.AuthInfo.(connInfo); ok {
				_ = info.conn.Close()
			}
		}
		err = status.Error(codes.Unavailable, "pvchaos-csi proxy: connection closed by rule")
	case rule.Action == ActionFailReply:
		if err = forward(); err == nil {
			err = rule.status()
		}
	}
	p.record(method, summary, rule, err, time.Since(start), driverTime)
	if err != nil {
		return err
	}
	return stream.SendMsg(&resp)
}

func (r Rule) status() error {
	c, _ := CodeOf(r.Code)
	return status.Error(c, r.Message)
}

// outgoing carries the caller's deadline (ctx) and its own metadata, not the transport's.
func outgoing(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" {
			continue
		}
		out[k] = v
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// Decode reads what rules select on and the log shows from a request's bytes, by the
// method's input type in the CSI descriptors; an unknown method or bad bytes is a call
// with only its method.
func Decode(method string, data []byte) (Call, map[string]any) {
	call := Call{Method: method}
	name := protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", "."))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return call, nil
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return call, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return call, nil
	}
	msg := mt.New().Interface()
	if proto.Unmarshal(data, msg) != nil {
		return call, nil
	}
	summary := driver.RequestSummary(msg)
	call.VolumeID, _ = summary["volume_id"].(string)
	call.SnapshotID, _ = summary["snapshot_id"].(string)
	call.NodeID, _ = summary["node_id"].(string)
	call.Name, _ = summary["name"].(string)
	if r, ok := msg.(interface {
		GetAccessibilityRequirements() *csi.TopologyRequirement
	}); ok {
		req := r.GetAccessibilityRequirements()
		switch { // the provisioner puts the selected node's topology first
		case len(req.GetPreferred()) > 0:
			call.Segment = req.GetPreferred()[0].GetSegments()
		case len(req.GetRequisite()) > 0:
			call.Segment = req.GetRequisite()[0].GetSegments()
		}
	}
	return call, summary
}

type record struct {
	Time      string         `json:"time"`
	Method    string         `json:"method"`
	Request   map[string]any `json:"request,omitempty"`
	Code      string         `json:"code"`
	Message   string         `json:"message,omitempty"`
	LatencyMS float64        `json:"latency_ms"`          // as the caller saw it
	DriverMS  float64        `json:"driver_ms,omitempty"` // the driver's part (0: not forwarded)
	Rule      string         `json:"rule,omitempty"`      // the rule that fired: its id, else its action
	Action    string         `json:"action,omitempty"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func (p *Proxy) record(method string, summary map[string]any, rule *Rule, err error, total, driverTime time.Duration) {
	if p.log == nil {
		return
	}
	st := status.Convert(err)
	rec := record{Time: time.Now().UTC().Format(time.RFC3339Nano), Method: method, Request: summary,
		Code: st.Code().String(), Message: st.Message(), LatencyMS: ms(total), DriverMS: ms(driverTime)}
	if rule != nil {
		rec.Rule, rec.Action = rule.ID, rule.Action
		if rec.Rule == "" {
			rec.Rule = rule.Action
		}
	}
	p.Event(rec)
}

// Event appends one JSON line to the log (a call, or the proxy's own news).
func (p *Proxy) Event(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if p.log != nil {
		_, _ = p.log.Write(append(data, '\n')) // O_APPEND: one write, one whole line
	}
}
