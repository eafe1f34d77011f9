package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// recorder is an inner provisioner that succeeds (or returns a fixed failure) and keeps
// the options it was called with.
type recorder struct {
	calls []controller.ProvisionOptions
	state controller.ProvisioningState
	err   error
}

func (r *recorder) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	r.calls = append(r.calls, opts)
	if r.err != nil {
		return nil, r.state, r.err
	}
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: opts.PVName}}, controller.ProvisioningFinished, nil
}

func (r *recorder) Delete(context.Context, *v1.PersistentVolume) error { return nil }

func claim(node string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "data", Namespace: "ns", UID: "uid-1", ResourceVersion: "10", Annotations: map[string]string{}}}
	if node != "" {
		c.Annotations[annSelectedNode] = node
	}
	return c
}

func options(params map[string]string, node string) controller.ProvisionOptions {
	return controller.ProvisionOptions{
		StorageClass:     &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Parameters: params},
		PVName:           "pvc-1",
		PVC:              claim(node),
		SelectedNodeName: node,
	}
}

func TestKnobParametersNeverReachTheProvisioner(t *testing.T) {
	inner := &recorder{}
	f := newFailing(inner, fake.NewSimpleClientset())
	params := map[string]string{keyNodes: "other", "type": "ssd"}
	if _, _, err := f.Provision(context.Background(), options(params, "n1")); err != nil {
		t.Fatal(err)
	}
	got := inner.calls[0].StorageClass.Parameters
	if len(got) != 1 || got["type"] != "ssd" {
		t.Fatalf("the inner provisioner saw %v", got)
	}
	if params[keyNodes] != "other" {
		t.Fatal("the informer's class was changed")
	}
}

func TestFirstNodeFailsUntilAnotherIsSelected(t *testing.T) {
	inner := &recorder{}
	f := newFailing(inner, fake.NewSimpleClientset())
	params := map[string]string{keyFirstNode: "true", keyReason: "full"}
	for i, node := range []string{"n1", "n1"} {
		_, state, err := f.Provision(context.Background(), options(params, node))
		if err == nil || !strings.Contains(err.Error(), "full") || state != controller.ProvisioningReschedule {
			t.Fatalf("attempt %d on %s: want a rescheduling failure, got %v, %v", i+1, node, state, err)
		}
	}
	if _, _, err := f.Provision(context.Background(), options(params, "n2")); err != nil {
		t.Fatalf("another node must provision: %v", err)
	}
	if len(inner.calls) != 1 || inner.calls[0].SelectedNodeName != "n2" {
		t.Fatalf("inner calls: %d", len(inner.calls))
	}
}

func TestFailZonesReadTheSelectedNodesZone(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{zoneKey: "zone-a"}}}
	f := newFailing(&recorder{}, fake.NewSimpleClientset(node))
	_, _, err := f.Provision(context.Background(), options(map[string]string{keyZones: "zone-a"}, "n1"))
	if err == nil || !strings.Contains(err.Error(), `zone "zone-a"`) {
		t.Fatalf("want a failure naming zone-a, got %v", err)
	}
}

func TestBadKnobIsAFinalFailureNamingTheClass(t *testing.T) {
	f := newFailing(&recorder{}, fake.NewSimpleClientset())
	_, state, err := f.Provision(context.Background(), options(map[string]string{keyTimes: "x"}, "n1"))
	if err == nil || state != controller.ProvisioningFinished || !strings.Contains(err.Error(), `StorageClass "sc"`) {
		t.Fatalf("got %v, %v", state, err)
	}
}

func reschedulingOver(t *testing.T, mode rescheduleMode, objects ...runtime.Object) (*rescheduling, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset(objects...)
	inner := &recorder{state: controller.ProvisioningReschedule, err: errors.New("no space")}
	return &rescheduling{inner: inner, client: client, mode: mode}, client
}

func selectedNodeOf(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	c, err := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Annotations[annSelectedNode]
}

func TestGuardedRescheduleRemovesTheAnnotationAndStopsTheLibrarysOwn(t *testing.T) {
	r, client := reschedulingOver(t, rescheduleGuarded, claim("n1"))
	_, state, err := r.Provision(context.Background(), options(nil, "n1"))
	if state != controller.ProvisioningFinished || err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("got %v, %v", state, err)
	}
	if node := selectedNodeOf(t, client); node != "" {
		t.Fatalf("selected-node still %q", node)
	}
}

func TestGuardedRescheduleNeverRemovesANewerNode(t *testing.T) {
	// The scheduler already moved the claim to n2: our update (resourceVersion 10)
	// conflicts, the fresh claim names n2, and it is left alone.
	newer := claim("n2")
	newer.ResourceVersion = "11"
	r, client := reschedulingOver(t, rescheduleGuarded, newer)
	conflicts := 0
	client.PrependReactor("update", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim).ResourceVersion == "10" {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data", errors.New("stale"))
		}
		return false, nil, nil
	})
	_, _, err := r.Provision(context.Background(), options(nil, "n1"))
	if conflicts != 1 || err == nil || !strings.Contains(err.Error(), "left as it is") {
		t.Fatalf("conflicts %d, err %v", conflicts, err)
	}
	if node := selectedNodeOf(t, client); node != "n2" {
		t.Fatalf("the scheduler's n2 was overwritten: %q", node)
	}
}

func TestRescheduleOffKeepsTheAnnotation(t *testing.T) {
	r, client := reschedulingOver(t, rescheduleOff, claim("n1"))
	_, state, _ := r.Provision(context.Background(), options(nil, "n1"))
	if state != controller.ProvisioningFinished || selectedNodeOf(t, client) != "n1" {
		t.Fatalf("state %v, node %q", state, selectedNodeOf(t, client))
	}
}

func TestLibraryModeHandsTheRescheduleToTheLibrary(t *testing.T) {
	r, client := reschedulingOver(t, rescheduleLibrary, claim("n1"))
	_, state, _ := r.Provision(context.Background(), options(nil, "n1"))
	if state != controller.ProvisioningReschedule || selectedNodeOf(t, client) != "n1" {
		t.Fatalf("state %v, node %q", state, selectedNodeOf(t, client))
	}
}

func TestParseRescheduleMode(t *testing.T) {
	if _, err := parseRescheduleMode("sometimes"); err == nil {
		t.Fatal("accepted a bad mode")
	}
}
