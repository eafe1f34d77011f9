module pvchaos.dev/csidriver

go 1.25.0

require (
	github.com/container-storage-interface/spec v1.14.0
	golang.org/x/sys v0.45.0
	google.golang.org/grpc v1.83.1
	google.golang.org/protobuf v1.36.11
	k8s.io/kubelet v0.35.4
)

require (
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
)
