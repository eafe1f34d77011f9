package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const (
	zoneKey     = "topology.kubernetes.io/zone"
	hostnameKey = "kubernetes.io/hostname"
)

// zonalProvisioner makes PVs that can be used from every node of one zone.
type zonalProvisioner struct{ client kubernetes.Interface }

// localProvisioner makes PVs that can be used from one node only.
type localProvisioner struct{ client kubernetes.Interface }

func (p *zonalProvisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	var zone string
	if opts.SelectedNodeName != "" {
		node, err := p.client.CoreV1().Nodes().Get(ctx, opts.SelectedNodeName, metav1.GetOptions{})
		if err != nil {
			// The node may be gone: ask the scheduler to pick again.
			return nil, controller.ProvisioningReschedule, fmt.Errorf("selected node %q: %w", opts.SelectedNodeName, err)
		}
		zone = node.Labels[zoneKey]
		if zone == "" {
			return nil, controller.ProvisioningReschedule, fmt.Errorf("selected node %q has no %s label", node.Name, zoneKey)
		}
		if allowed := allowedValues(opts.StorageClass, zoneKey); len(allowed) > 0 && !contains(allowed, zone) {
			return nil, controller.ProvisioningReschedule, fmt.Errorf("zone %q of node %q is not in the class's allowedTopologies %v", zone, node.Name, allowed)
		}
	} else {
		zones := allowedValues(opts.StorageClass, zoneKey)
		if len(zones) == 0 {
			var err error
			if zones, err = p.clusterZones(ctx); err != nil {
				return nil, controller.ProvisioningFinished, err
			}
		}
		if len(zones) == 0 {
			return nil, controller.ProvisioningFinished, errors.New("no node carries a " + zoneKey + " label")
		}
		zone = zones[pick(opts.PVName, len(zones))]
	}
	pv := basePV(opts)
	pv.Spec.PersistentVolumeSource = volumeSource(v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver:       opts.StorageClass.Provisioner,
		VolumeHandle: opts.PVName,
		FSType:       "ext4",
	}}, opts.PVName)
	pv.Spec.NodeAffinity = affinity(zoneKey, zone)
	return pv, controller.ProvisioningFinished, nil
}

func (p *zonalProvisioner) Delete(context.Context, *v1.PersistentVolume) error { return nil }

// clusterZones lists the zones that nodes carry, sorted, for Immediate provisioning.
func (p *zonalProvisioner) clusterZones(ctx context.Context) ([]string, error) {
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		if z := n.Labels[zoneKey]; z != "" {
			seen[z] = true
		}
	}
	zones := make([]string, 0, len(seen))
	for z := range seen {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones, nil
}

func (p *localProvisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if opts.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, errors.New("node-local volumes need volumeBindingMode WaitForFirstConsumer")
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, opts.SelectedNodeName, metav1.GetOptions{})
	if err != nil {
		return nil, controller.ProvisioningReschedule, fmt.Errorf("selected node %q: %w", opts.SelectedNodeName, err)
	}
	hostname := node.Labels[hostnameKey]
	if hostname == "" {
		hostname = node.Name
	}
	pv := basePV(opts)
	pv.Spec.PersistentVolumeSource = volumeSource(v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{
		Path: "/var/lib/pvchaos/" + opts.PVName,
	}}, opts.PVName)
	pv.Spec.NodeAffinity = affinity(hostnameKey, hostname)
	return pv, controller.ProvisioningFinished, nil
}

func (p *localProvisioner) Delete(context.Context, *v1.PersistentVolume) error { return nil }

// hostPathRoot, when set, replaces every source by a hostPath directory under it.
var hostPathRoot string

// volumeSource is `stand` (a source only the API server sees) unless a real kubelet
// must mount the volume: then a directory it creates on the node the affinity picks.
func volumeSource(stand v1.PersistentVolumeSource, name string) v1.PersistentVolumeSource {
	if hostPathRoot == "" {
		return stand
	}
	kind := v1.HostPathDirectoryOrCreate
	return v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostPathRoot + "/" + name, Type: &kind}}
}

// basePV copies what the claim asks for: capacity, access modes, volume mode, class, reclaim policy.
func basePV(opts controller.ProvisionOptions) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			VolumeMode:                    opts.PVC.Spec.VolumeMode,
			MountOptions:                  opts.StorageClass.MountOptions,
			Capacity: v1.ResourceList{
				v1.ResourceStorage: opts.PVC.Spec.Resources.Requests[v1.ResourceStorage],
			},
		},
	}
}

func affinity(key, value string) *v1.VolumeNodeAffinity {
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: []string{value}}},
	}}}}
}

// allowedValues returns the values the class's allowedTopologies allow for key, sorted.
func allowedValues(class *storagev1.StorageClass, key string) []string {
	var values []string
	for _, term := range class.AllowedTopologies {
		for _, expr := range term.MatchLabelExpressions {
			if expr.Key == key {
				values = append(values, expr.Values...)
			}
		}
	}
	sort.Strings(values)
	return values
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// pick spreads Immediate volumes over the allowed zones, stable for a given PV name.
func pick(name string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}
