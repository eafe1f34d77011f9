// pvchaos's stand-in for a module the Go module proxy does not serve (see README.md).
module sigs.k8s.io/iptables-wrappers

go 1.24
