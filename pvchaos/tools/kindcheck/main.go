// Command kindcheck loads kind cluster configs the way kind v0.33.0 does, without Docker.
//
// For each file it runs kind's strict loader (unknown keys fail) and kind's validator,
// then, for each requested Kubernetes version, renders the kubeadm config kind would
// write on every node and applies the file's kubeadmConfigPatches with kind's patcher.
// It prints one JSON object per file so a test can assert what the nodes would get.
//
//	kindcheck [-k8s v1.35.8,v1.36.4] FILE...
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/cluster/internal/kubeadm"
	"sigs.k8s.io/kind/pkg/internal/apis/config"
	"sigs.k8s.io/kind/pkg/internal/apis/config/encoding"
	"sigs.k8s.io/kind/pkg/internal/patch"
)

type rendered struct {
	KubeadmAPIVersion     string            `json:"kubeadmAPIVersion"`
	ControllerManagerArgs map[string]string `json:"controllerManagerArgs"`
	APIServerArgs         map[string]string `json:"apiServerArgs"`
	SchedulerArgs         map[string]string `json:"schedulerArgs"`
	Kubelet               map[string]any    `json:"kubelet"`
	NodeLabels            []string          `json:"nodeLabels"`
	UnmatchedPatchKinds   []string          `json:"unmatchedPatchKinds"`
}

type nodeOut struct {
	Role   string            `json:"role"`
	Image  string            `json:"image"`
	Labels map[string]string `json:"labels"`
	// ExtraMounts as kind's strict loader decoded them (the zones' CSI directories).
	ExtraMounts []mountOut `json:"extraMounts,omitempty"`
}

type mountOut struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	Propagation   string `json:"propagation"`
}

type result struct {
	File         string              `json:"file"`
	OK           bool                `json:"ok"`
	Error        string              `json:"error,omitempty"`
	Name         string              `json:"name,omitempty"`
	Nodes        []nodeOut           `json:"nodes,omitempty"`
	FeatureGates map[string]bool     `json:"featureGates,omitempty"`
	DefaultImage string              `json:"defaultImage"`
	Rendered     map[string]rendered `json:"rendered,omitempty"`
}

func main() {
	versions := flag.String("k8s", "v1.35.8,v1.36.4,v1.37.0", "Kubernetes versions to render kubeadm configs for")
	name := flag.String("name", "pvchaos", "cluster name, as `kind create cluster --name` would set it")
	flag.Parse()
	failed := false
	enc := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		res := check(file, *name, strings.Split(*versions, ","))
		if !res.OK {
			failed = true
		}
		_ = enc.Encode(res)
	}
	if failed || flag.NArg() == 0 {
		os.Exit(1)
	}
}

func check(file, name string, versions []string) result {
	res := result{File: file, DefaultImage: defaults.Image}
	cfg, err := encoding.Load(file)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	// as fixupOptions in pkg/cluster/internal/create does before validating
	if name != "" {
		cfg.Name = name
	}
	config.SetDefaultsCluster(cfg)
	if err := cfg.Validate(); err != nil {
		res.Error = "invalid: " + err.Error()
		return res
	}
	res.Name, res.FeatureGates = cfg.Name, cfg.FeatureGates
	for _, n := range cfg.Nodes {
		out := nodeOut{Role: string(n.Role), Image: n.Image, Labels: n.Labels}
		for _, m := range n.ExtraMounts {
			out.ExtraMounts = append(out.ExtraMounts, mountOut{HostPath: m.HostPath, ContainerPath: m.ContainerPath,
				Propagation: string(m.Propagation)})
		}
		res.Nodes = append(res.Nodes, out)
	}
	res.Rendered = map[string]rendered{}
	for _, v := range versions {
		r, err := render(cfg, strings.TrimSpace(v))
		if err != nil {
			res.Error = fmt.Sprintf("kubeadm config for %s: %v", v, err)
			return res
		}
		res.Rendered[v] = r
	}
	res.OK = true
	return res
}

// render mirrors getKubeadmConfig in pkg/cluster/internal/create/actions/config: the
// template for the node's version, cluster patches, then the node's own patches.
func render(cfg *config.Cluster, version string) (rendered, error) {
	out := rendered{ControllerManagerArgs: map[string]string{}, APIServerArgs: map[string]string{},
		SchedulerArgs: map[string]string{}, Kubelet: map[string]any{}}
	for i, n := range cfg.Nodes {
		data := kubeadm.ConfigData{
			ClusterName: cfg.Name, KubernetesVersion: version,
			ControlPlaneEndpoint: cfg.Name + "-control-plane:6443", APIBindPort: 6443,
			APIServerAddress: "127.0.0.1", Token: kubeadm.Token,
			PodSubnet: cfg.Networking.PodSubnet, ServiceSubnet: cfg.Networking.ServiceSubnet,
			KubeProxyMode: string(cfg.Networking.KubeProxyMode), FeatureGates: cfg.FeatureGates,
			RuntimeConfig: cfg.RuntimeConfig, IPFamily: cfg.Networking.IPFamily,
			NodeAddress: fmt.Sprintf("172.18.0.%d", i+2), NodeName: fmt.Sprintf("node-%d", i),
			ControlPlane: n.Role == config.ControlPlaneRole, NodeLabels: labelString(n.Labels),
		}
		text, err := kubeadm.Config(data)
		if err != nil {
			return out, err
		}
		kinds := docKinds(text)
		for _, p := range append(append([]string{}, cfg.KubeadmConfigPatches...), n.KubeadmConfigPatches...) {
			var head struct {
				Kind string `yaml:"kind"`
			}
			if err := yaml.Unmarshal([]byte(p), &head); err != nil || !kinds[head.Kind] {
				out.UnmatchedPatchKinds = append(out.UnmatchedPatchKinds, head.Kind)
			}
		}
		if text, err = patch.KubeYAML(text, cfg.KubeadmConfigPatches, cfg.KubeadmConfigPatchesJSON6902); err != nil {
			return out, err
		}
		if len(n.KubeadmConfigPatches) > 0 || len(n.KubeadmConfigPatchesJSON6902) > 0 {
			if text, err = patch.KubeYAML(text, n.KubeadmConfigPatches, n.KubeadmConfigPatchesJSON6902); err != nil {
				return out, err
			}
		}
		if err := collect(text, n.Role == config.ControlPlaneRole, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func labelString(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func docs(text string) []map[string]any {
	var out []map[string]any
	for _, raw := range strings.Split(text, "\n---\n") {
		var m map[string]any
		if yaml.Unmarshal([]byte(raw), &m) == nil && m != nil {
			out = append(out, m)
		}
	}
	return out
}

func docKinds(text string) map[string]bool {
	kinds := map[string]bool{}
	for _, d := range docs(text) {
		if k, ok := d["kind"].(string); ok {
			kinds[k] = true
		}
	}
	return kinds
}

// args reads extraArgs in either kubeadm form: a map (v1beta3) or a name/value list (v1beta4).
func args(v any) map[string]string {
	out := map[string]string{}
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			out[k] = fmt.Sprint(val)
		}
	case []any:
		for _, item := range t {
			if m, ok := item.(map[string]any); ok {
				out[fmt.Sprint(m["name"])] = fmt.Sprint(m["value"])
			}
		}
	}
	return out
}

func sub(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func collect(text string, controlPlane bool, out *rendered) error {
	for _, d := range docs(text) {
		switch d["kind"] {
		case "ClusterConfiguration":
			if controlPlane {
				out.KubeadmAPIVersion = fmt.Sprint(d["apiVersion"])
				out.ControllerManagerArgs = args(sub(d, "controllerManager")["extraArgs"])
				out.APIServerArgs = args(sub(d, "apiServer")["extraArgs"])
				out.SchedulerArgs = args(sub(d, "scheduler")["extraArgs"])
			}
		case "KubeletConfiguration":
			for k, v := range d {
				if k != "kind" && k != "apiVersion" {
					out.Kubelet[k] = v
				}
			}
		case "InitConfiguration", "JoinConfiguration":
			if controlPlane != (d["kind"] == "InitConfiguration") {
				continue
			}
			reg := sub(d, "nodeRegistration")
			out.NodeLabels = append(out.NodeLabels, args(reg["kubeletExtraArgs"])["node-labels"])
		}
	}
	return nil
}
