package driver

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	mnm = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	mnr = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
)

func TestCheckPublish(t *testing.T) {
	zonal := func(published map[string]*Attachment) *Volume {
		return &Volume{ID: "v", Mode: ModeZone, Zone: "z1", Published: published}
	}
	att := func(m csi.VolumeCapability_AccessMode_Mode, ro bool) *Attachment {
		return &Attachment{AccessMode: m.String(), Readonly: ro}
	}
	cases := []struct {
		name     string
		v        *Volume
		attached int
		r        PublishRequest
		already  bool
		code     codes.Code
	}{
		{"first publish", zonal(nil), 0, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw}, false, codes.OK},
		{"same node again", zonal(map[string]*Attachment{"n1": att(snw, false)}), 1, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw}, true, codes.OK},
		{"same node, now readonly", zonal(map[string]*Attachment{"n1": att(snw, false)}), 1, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw, Readonly: true}, false, codes.AlreadyExists},
		{"single-node to another node", zonal(map[string]*Attachment{"n1": att(snw, false)}), 0, PublishRequest{NodeID: "n2", Hostname: "n2", AccessMode: snw}, false, codes.FailedPrecondition},
		{"multi-node to another node", zonal(map[string]*Attachment{"n1": att(mnm, false)}), 0, PublishRequest{NodeID: "n2", Hostname: "n2", AccessMode: mnm}, false, codes.OK},
		{"multi after single elsewhere", zonal(map[string]*Attachment{"n1": att(snw, false)}), 0, PublishRequest{NodeID: "n2", Hostname: "n2", AccessMode: mnr}, false, codes.FailedPrecondition},
		{"node-local to its node", &Volume{ID: "v", Mode: ModeNode, Node: "n1"}, 0, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw}, false, codes.OK},
		{"node-local to another node", &Volume{ID: "v", Mode: ModeNode, Node: "n1"}, 0, PublishRequest{NodeID: "n2", Hostname: "n2", AccessMode: snw}, false, codes.FailedPrecondition},
		{"node full", zonal(nil), 3, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw, MaxVolumes: 3}, false, codes.ResourceExhausted},
		{"node not full", zonal(nil), 2, PublishRequest{NodeID: "n1", Hostname: "n1", AccessMode: snw, MaxVolumes: 3}, false, codes.OK},
	}
	for _, c := range cases {
		already, err := CheckPublish(c.v, c.attached, c.r)
		if got := status.Code(err); got != c.code || already != c.already {
			t.Errorf("%s: got (%v, %v), want (%v, %v)", c.name, already, err, c.already, c.code)
		}
	}
}
