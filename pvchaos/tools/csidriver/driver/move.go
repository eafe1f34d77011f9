package driver

// The operator's move of a node-local volume: what a storage system's migration does
// when a node is retired (KEP-5381's "fault recovery and maintenance" scenario). The
// operator copies the volume's directory to the new node's --data-root/local/<id> and
// records the move in <control-dir>/moves.json, {"<volume id>": "<new hostname>"}. The
// controller then publishes the volume to the new node only (the old one no longer has
// it), and the node plugin serves a node-local volume of another node only where its
// directory exists, i.e. where the data was copied. The PV's nodeAffinity is Kubernetes'
// side of the move: the operator changes it too (MutablePVNodeAffinity), or the
// scheduler keeps sending the pod to the old node.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// MovesFile is the operator's record of moved node-local volumes under --control-dir.
const MovesFile = "moves.json"

// VolumeMoves reads <controlDir>/moves.json. No control dir or no file: no moves. Read
// on every publish, so the operator's step needs no restart.
func VolumeMoves(controlDir string) (map[string]string, error) {
	out := map[string]string{}
	if controlDir == "" {
		return out, nil
	}
	path := filepath.Join(controlDir, MovesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %v (want {\"<volume id>\": \"<hostname>\"})", path, err)
	}
	return out, nil
}

// ApplyMove points a node-local volume at the node the operator moved it to; it says
// whether the volume changed. Zonal volumes have no node and never move.
func ApplyMove(v *Volume, moves map[string]string) bool {
	to, ok := moves[v.ID]
	if !ok || to == "" || v.Mode != ModeNode || v.Node == to {
		return false
	}
	v.Node = to
	return true
}
