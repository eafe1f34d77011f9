package main

// Our own reschedule, instead of sig-storage-lib-external-provisioner's.
//
// When Provision returns ProvisioningReschedule for a claim with a selected node, the
// library (v13.1.0, rescheduleProvisioning) removes volume.kubernetes.io/selected-node
// and then writes the Update's answer into its claim informer's store. If the
// scheduler has meanwhile picked a new node and the informer has already stored that
// newer claim, the library's write puts the older copy (no selected node) back. Resyncs
// replay the store, so the claim looks unscheduled to the provisioner until the next
// relist or the next change of the claim: the new node is never acted on
// (docs/findings.md, bench/reschedule_loop.py). Here the annotation is removed with an
// optimistic-concurrency update, only while it still names the node that failed, and
// nothing is ever written into an informer's store; the library is handed
// ProvisioningFinished so it does not reschedule again.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const annSelectedNode = "volume.kubernetes.io/selected-node"

// rescheduleMode says who gives a claim back to the scheduler after a failure that asks for it.
type rescheduleMode string

const (
	rescheduleGuarded rescheduleMode = "guarded" // ours (default): conditional update, no store write
	rescheduleLibrary rescheduleMode = "library" // the library's rescheduleProvisioning (has the race)
	rescheduleOff     rescheduleMode = "off"     // nobody: the annotation stays (self-checks: a broken reschedule)
)

func parseRescheduleMode(s string) (rescheduleMode, error) {
	switch m := rescheduleMode(s); m {
	case rescheduleGuarded, rescheduleLibrary, rescheduleOff:
		return m, nil
	}
	return "", fmt.Errorf("-reschedule=%q: want guarded, library or off", s)
}

// maxConflicts bounds the retries of the conditional update.
const maxConflicts = 5

// rescheduling wraps a provisioner and handles its ProvisioningReschedule answers.
type rescheduling struct {
	inner  controller.Provisioner
	client kubernetes.Interface
	mode   rescheduleMode
}

func (r *rescheduling) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	pv, state, err := r.inner.Provision(ctx, opts)
	if err == nil || state != controller.ProvisioningReschedule || opts.SelectedNodeName == "" || r.mode == rescheduleLibrary {
		return pv, state, err
	}
	if r.mode == rescheduleOff {
		return nil, controller.ProvisioningFinished, err // retried later on the same node
	}
	removed, rerr := releaseSelectedNode(ctx, r.client, opts.PVC, opts.SelectedNodeName)
	switch {
	case rerr != nil:
		return nil, controller.ProvisioningFinished, fmt.Errorf("%w; removing %s failed, will retry: %v", err, annSelectedNode, rerr)
	case removed:
		return nil, controller.ProvisioningFinished, fmt.Errorf("%w; %s removed so the scheduler picks again", err, annSelectedNode)
	default:
		return nil, controller.ProvisioningFinished, fmt.Errorf("%w; %s no longer names %q, left as it is", err, annSelectedNode, opts.SelectedNodeName)
	}
}

func (r *rescheduling) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	return r.inner.Delete(ctx, pv)
}

// releaseSelectedNode removes the selected-node annotation from the claim if it still
// names `node`. The update carries the claim's resourceVersion, so a newer claim (the
// scheduler's next pick) is never overwritten: on a conflict the claim is read again
// and the annotation removed only if it still names the failed node. Returns whether
// this call removed it.
func releaseSelectedNode(ctx context.Context, client kubernetes.Interface, claim *v1.PersistentVolumeClaim, node string) (bool, error) {
	claims := client.CoreV1().PersistentVolumeClaims(claim.Namespace)
	current := claim.DeepCopy()
	for try := 0; try < maxConflicts; try++ {
		if current.Annotations[annSelectedNode] != node {
			return false, nil
		}
		delete(current.Annotations, annSelectedNode)
		_, err := claims.Update(ctx, current, metav1.UpdateOptions{})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		current, err = claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("claim %s/%s kept changing (%d conflicts)", claim.Namespace, claim.Name, maxConflicts)
}
