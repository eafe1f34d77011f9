// Command upstream-decoder records how upstream's e2e reader fills a driver definition:
// the same decoder call as test/e2e/storage/external/external.go (loadDriverDefinition),
// apimachinery's non-strict UniversalDecoder, into a struct with driverDefinition's field
// names and types, preset with its defaults. It prints one JSON object per file: the
// decoded value, or the decoder's error. tests/unit/test_profile_files.py compares
// pvchaos's reader with what this printed (recorded.json).
//
//	cd tests/unit/data/profiles/upstream-decoder && GOFLAGS=-mod=mod go run . ../*.yaml ../*.json > recorded.json
package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
)

type sizeRange struct{ Max, Min, Step string }

type classSource struct {
	FromName              bool
	FromFile              string
	FromExistingClassName string
}

type driverInfo struct {
	Name                 string
	InTreePluginName     string
	TestTags             []interface{}
	MaxFileSize          int64
	SupportedSizeRange   sizeRange
	SupportedFsType      sets.String
	SupportedMountOption sets.String
	RequiredMountOption  sets.String
	Capabilities         map[string]bool
	RequiredAccessModes  []string
	TopologyKeys         []string
	NumAllowedTopologies int
	StressTestOptions    *struct{ NumPods, NumRestarts int }
}

type inlineVolume struct {
	Attributes map[string]string
	Shared     bool
	ReadOnly   bool
}

type definition struct {
	DriverInfo            driverInfo
	StorageClass          classSource
	VolumeAttributesClass struct{ FromFile, FromExistingClassName string }
	SnapshotClass         classSource
	GroupSnapshotClass    classSource
	InlineVolumes         []inlineVolume
	ClientNodeName        string
	NodeSelectors         map[string]string
	Timeouts              map[string]string
}

func (d *definition) DeepCopyObject() runtime.Object   { return nil }
func (d *definition) GetObjectKind() schema.ObjectKind { return nil }

type record struct {
	Decoded         *definition `json:",omitempty"`
	SupportedFsType []string    `json:",omitempty"`
	Error           string      `json:",omitempty"`
}

func main() {
	decoder := serializer.NewCodecFactory(runtime.NewScheme()).UniversalDecoder()
	out := map[string]record{}
	for _, name := range os.Args[1:] {
		data, err := os.ReadFile(name)
		if err != nil {
			panic(err)
		}
		d := &definition{DriverInfo: driverInfo{SupportedFsType: sets.NewString(""), SupportedSizeRange: sizeRange{Min: "5Gi"}}}
		if err := runtime.DecodeInto(decoder, data, d); err != nil {
			out[filepath.Base(name)] = record{Error: err.Error()}
			continue
		}
		out[filepath.Base(name)] = record{Decoded: d, SupportedFsType: d.DriverInfo.SupportedFsType.List()}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
