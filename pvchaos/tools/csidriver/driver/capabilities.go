package driver

// Volume capabilities: which access modes and types a volume of each mode supports.

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// singleNode says whether an access mode lets only one node use the volume, which is what
// makes ControllerPublishVolume to a second node FAILED_PRECONDITION.
func singleNode(mode csi.VolumeCapability_AccessMode_Mode) bool {
	switch mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// CheckCapability says why a capability is unusable for a volume of `mode` ("" when it
// is fine): it needs an access mode, a mount or block access type, and multi-node access
// only for zonal volumes (a node-local volume cannot be reached from a second node).
func CheckCapability(c *csi.VolumeCapability, mode string) string {
	if c == nil {
		return "a volume capability is nil"
	}
	if c.GetMount() == nil && c.GetBlock() == nil {
		return "volume capability has no access type (want mount or block)"
	}
	am := c.GetAccessMode().GetMode()
	if _, known := csi.VolumeCapability_AccessMode_Mode_name[int32(am)]; !known || am == csi.VolumeCapability_AccessMode_UNKNOWN {
		return fmt.Sprintf("access mode %v is not supported", am)
	}
	if mode == ModeNode && !singleNode(am) {
		return fmt.Sprintf("access mode %v needs several nodes; %s=%s volumes are reachable from their node only", am, ParamTopology, ModeNode)
	}
	return ""
}

// CheckCapabilities checks a list, which must not be empty.
func CheckCapabilities(caps []*csi.VolumeCapability, mode string) string {
	if len(caps) == 0 {
		return "volume_capabilities missing"
	}
	for _, c := range caps {
		if why := CheckCapability(c, mode); why != "" {
			return why
		}
	}
	return ""
}

// accessModeNames are the capabilities' access modes, as stored in the state file.
func accessModeNames(caps []*csi.VolumeCapability) []string {
	out := []string{}
	for _, c := range caps {
		out = append(out, c.GetAccessMode().GetMode().String())
	}
	return out
}

// accessTypeName is "block" or "mount", for logs.
func accessTypeName(c *csi.VolumeCapability) string {
	switch {
	case c.GetBlock() != nil:
		return "block"
	case c.GetMount() != nil:
		return "mount"
	}
	return "none"
}

func describeCaps(caps []*csi.VolumeCapability) string {
	parts := []string{}
	for _, c := range caps {
		parts = append(parts, accessTypeName(c)+"/"+c.GetAccessMode().GetMode().String())
	}
	return strings.Join(parts, ",")
}
