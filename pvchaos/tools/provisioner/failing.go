package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// failing wraps a provisioner with the class-parameter failure knob (knob.go). It
// remembers, per claim, the first node selected for it and how many attempts it failed.
type failing struct {
	inner  controller.Provisioner
	client kubernetes.Interface

	mu     sync.Mutex
	claims map[types.UID]*claimHistory
}

type claimHistory struct {
	firstNode string
	failed    int
}

func newFailing(inner controller.Provisioner, client kubernetes.Interface) *failing {
	return &failing{inner: inner, client: client, claims: map[types.UID]*claimHistory{}}
}

func (f *failing) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	plan, err := parseFailPlan(opts.StorageClass.Parameters)
	if err != nil {
		// A broken knob is the class's fault: final, no rescheduling (another node won't help).
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %q: %w", opts.StorageClass.Name, err)
	}
	opts.StorageClass = opts.StorageClass.DeepCopy()
	opts.StorageClass.Parameters = withoutKnob(opts.StorageClass.Parameters)
	if plan == nil {
		return f.inner.Provision(ctx, opts)
	}
	a := f.attempt(ctx, plan, opts)
	if !plan.shouldFail(a) {
		pv, state, err := f.inner.Provision(ctx, opts)
		if err == nil {
			f.forget(opts.PVC.UID) // provisioned: nothing more to count
		}
		return pv, state, err
	}
	f.recordFailure(opts.PVC.UID)
	if plan.delay > 0 {
		select {
		case <-time.After(plan.delay):
		case <-ctx.Done():
		}
	}
	return nil, plan.action, plan.failure(a)
}

func (f *failing) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	return f.inner.Delete(ctx, pv)
}

// attempt gathers what the decision needs; the first selected node is remembered here.
func (f *failing) attempt(ctx context.Context, plan *failPlan, opts controller.ProvisionOptions) attempt {
	f.mu.Lock()
	h := f.claims[opts.PVC.UID]
	if h == nil {
		h = &claimHistory{}
		f.claims[opts.PVC.UID] = h
	}
	if h.firstNode == "" {
		h.firstNode = opts.SelectedNodeName
	}
	a := attempt{node: opts.SelectedNodeName, firstNode: h.firstNode, failed: h.failed}
	f.mu.Unlock()
	if plan.needsZone() && a.node != "" {
		if node, err := f.client.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{}); err == nil {
			a.zone = node.Labels[zoneKey]
		}
	}
	return a
}

func (f *failing) recordFailure(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims[uid].failed++
}

func (f *failing) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.claims, uid)
}
