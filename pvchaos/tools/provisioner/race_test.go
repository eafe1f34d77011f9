package main

// The reschedule race, made deterministic: the scheduler's next pick (node-2) reaches
// the provisioner's claim informer after the API server stored the removal of
// selected-node but before the provisioner got the answer to its update. That is the
// order in which sig-storage-lib-external-provisioner v13.1.0 (rescheduleProvisioning)
// then writes its older copy of the claim into the informer's store; resyncs replay that
// copy, so node-2 is never provisioned. Our guarded reschedule writes nothing into the
// store, and node-2 is provisioned.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const raceProvisioner = "race.pvchaos.dev"

// nodeRecorder fails on node-1 asking for another node, provisions anywhere else, and
// records the nodes it was asked for.
type nodeRecorder struct {
	mu    sync.Mutex
	nodes []string
}

func (n *nodeRecorder) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	n.mu.Lock()
	n.nodes = append(n.nodes, opts.SelectedNodeName)
	n.mu.Unlock()
	if opts.SelectedNodeName == "node-1" {
		return nil, controller.ProvisioningReschedule, errors.New("no space on node-1")
	}
	pv := basePV(opts)
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: raceProvisioner, VolumeHandle: opts.PVName}}
	return pv, controller.ProvisioningFinished, nil
}

func (n *nodeRecorder) Delete(context.Context, *v1.PersistentVolume) error { return nil }

func (n *nodeRecorder) askedFor(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.nodes {
		if x == node {
			return true
		}
	}
	return false
}

// raceResult is what a run saw: whether node-2 was provisioned, and the claim's
// selected node in the provisioner's informer store and on the API server at the end.
type raceResult struct {
	provisioned      bool
	store, apiServer string
}

// raceOnce runs one provision controller over a fake API server for `within`.
func raceOnce(t *testing.T, mode rescheduleMode, within time.Duration) raceResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	className := "sc"
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Provisioner: raceProvisioner, VolumeBindingMode: &wffc}
	claim := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "claim-uid", ResourceVersion: "1", Annotations: map[string]string{
			annSelectedNode: "node-1", "volume.kubernetes.io/storage-provisioner": raceProvisioner}},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	client := fake.NewSimpleClientset(class, claim)
	factory := informers.NewSharedInformerFactory(client, time.Second) // resync every second
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()

	var once sync.Once
	client.PrependReactor("update", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		removal := a.(k8stesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim).DeepCopy()
		if _, has := removal.Annotations[annSelectedNode]; has {
			return false, nil, nil
		}
		raced := false
		once.Do(func() {
			raced = true
			gvr := v1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
			removal.ResourceVersion = "2"
			if err := client.Tracker().Update(gvr, removal, "ns"); err != nil {
				t.Errorf("store the removal: %v", err)
			}
			next := removal.DeepCopy() // the scheduler's next pick, 20 ms later in the original report
			next.ResourceVersion = "3"
			next.Annotations[annSelectedNode] = "node-2"
			if err := client.Tracker().Update(gvr, next, "ns"); err != nil {
				t.Errorf("store the next pick: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) { // the informer has the newer claim before the answer arrives
				if obj, ok, _ := claims.GetStore().GetByKey("ns/data"); ok && obj.(*v1.PersistentVolumeClaim).Annotations[annSelectedNode] == "node-2" {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("the informer never saw node-2")
		})
		if !raced {
			return false, nil, nil
		}
		return true, removal, nil
	})

	inner := &nodeRecorder{}
	ctrl := controller.NewProvisionController(ctx, client, raceProvisioner,
		&rescheduling{inner: inner, client: client, mode: mode},
		controller.LeaderElection(false), controller.ClaimsInformer(claims), controller.ResyncPeriod(time.Second),
		controller.Threadiness(1))
	factory.Start(ctx.Done())
	go ctrl.Run(ctx)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && !inner.askedFor("node-2") {
		time.Sleep(20 * time.Millisecond)
	}
	if !inner.askedFor("node-1") {
		t.Fatalf("%s: the provisioner was never asked for node-1: %v", mode, inner.nodes)
	}
	result := raceResult{provisioned: inner.askedFor("node-2")}
	if obj, ok, _ := claims.GetStore().GetByKey("ns/data"); ok {
		result.store = obj.(*v1.PersistentVolumeClaim).Annotations[annSelectedNode]
	}
	if fresh, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{}); err == nil {
		result.apiServer = fresh.Annotations[annSelectedNode]
	}
	return result
}

func TestLibraryRescheduleLosesTheSchedulersNextPick(t *testing.T) {
	r := raceOnce(t, rescheduleLibrary, 4*time.Second) // 4 resyncs
	if r.provisioned {
		t.Fatal("library v13.1.0 provisioned node-2; the stale-store race is gone (update docs/findings.md and reschedule.go)")
	}
	if r.apiServer != "node-2" || r.store != "" {
		t.Fatalf("want the API server at node-2 and the informer store stale (no selected node), got %+v", r)
	}
}

func TestGuardedRescheduleProvisionsTheSchedulersNextPick(t *testing.T) {
	if r := raceOnce(t, rescheduleGuarded, 4*time.Second); !r.provisioned {
		t.Fatalf("guarded reschedule: node-2 was never provisioned: %+v", r)
	}
}
