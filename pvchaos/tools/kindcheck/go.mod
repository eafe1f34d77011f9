// A config checker for kind-config/: kind's own loader, validator, kubeadm template and
// patcher, run without Docker. The module path sits under sigs.k8s.io/kind/pkg/cluster
// only so that Go's internal-package rule (decided by import path) lets this program call
// those internal packages, i.e. exactly the code `kind create cluster` runs. It is a test
// tool of pvchaos and is never published.
module sigs.k8s.io/kind/pkg/cluster/pvchaoskindcheck

go 1.22

require (
	go.yaml.in/yaml/v3 v3.0.4
	sigs.k8s.io/kind v0.33.0
)

require (
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/evanphx/json-patch/v5 v5.6.0 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)
