// Command gen writes the golden wire fixtures of informer-codec's tests:
// every object twice, as kube-apiserver's protobuf serializer writes it
// (`<name>.pb`: the `k8s\0` magic and the runtime.Unknown envelope) and as
// its JSON serializer writes it (`<name>.json`: encoding/json).
//
// The objects are built as an API server holds them after defaulting and
// after its controllers ran: server-set metadata, defaulted fields, status,
// and Go zero values where a real object has them (empty strings, zero
// times, pointers to 0, empty lists and maps that omitempty drops).
//
// Usage: gen <output directory>. See the README beside this file for how it
// is built.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

// at is a server timestamp: whole seconds, as metav1.Time keeps them.
func at(minute int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 3, 1, 12, minute, 7, 0, time.UTC))
}

// microAt is a MicroTime with microseconds, as events carry them.
func microAt(minute int) metav1.MicroTime {
	return metav1.NewMicroTime(time.Date(2026, 3, 1, 12, minute, 7, 123456000, time.UTC))
}

func meta(name, namespace, uid, rv string, generation int64) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         namespace,
		UID:               types.UID(uid),
		ResourceVersion:   rv,
		Generation:        generation,
		CreationTimestamp: at(0),
	}
}

func managed(manager, apiVersion string, fields string) []metav1.ManagedFieldsEntry {
	t := at(0)
	return []metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: apiVersion,
		Time:       &t,
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: []byte(fields)},
	}}
}

// container is an nginx container as defaulting leaves it: no ports, no
// env, terminationMessagePath and policy and pull policy set.
func container(name string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: "nginx:1.27",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			},
		},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
}

// podSpec is a defaulted pod spec with no node.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                    []corev1.Container{container("web")},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr(int64(30)),
		DNSPolicy:                     corev1.DNSClusterFirst,
		ServiceAccountName:            "default",
		DeprecatedServiceAccount:      "default",
		SecurityContext:               &corev1.PodSecurityContext{},
		SchedulerName:                 "default-scheduler",
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
		},
		Priority:           ptr(int32(0)),
		EnableServiceLinks: ptr(true),
		PreemptionPolicy:   ptr(corev1.PreemptLowerPriority),
	}
}

// template is a workload's pod template as stored: its metadata carries
// only labels (a zero creationTimestamp, which Go writes as null in JSON).
func template(labels map[string]string) corev1.PodTemplateSpec {
	spec := podSpec()
	spec.ServiceAccountName = ""
	spec.DeprecatedServiceAccount = ""
	spec.Tolerations = nil
	spec.Priority = nil
	spec.EnableServiceLinks = nil
	spec.PreemptionPolicy = nil
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       spec,
	}
}

func podPending() *corev1.Pod {
	m := meta("web-7d9f8b6c5d-x2x7k", "shop", "6f1c2a9e-0d1b-4c57-9a53-0f3c1d2e4b01", "4711", 0)
	m.GenerateName = "web-7d9f8b6c5d-"
	m.Labels = map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5d"}
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion:         "apps/v1",
		Kind:               "ReplicaSet",
		Name:               "web-7d9f8b6c5d",
		UID:                "0b8e3f7a-5c2d-4e1f-8a9b-7c6d5e4f3a21",
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}}
	m.ManagedFields = managed("kube-controller-manager", "v1", `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{}}}}`)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: m,
		Spec:       podSpec(),
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type:               corev1.PodScheduled,
				Status:             corev1.ConditionFalse,
				LastTransitionTime: at(0),
				Reason:             corev1.PodReasonUnschedulable,
				Message:            "0/3 nodes are available: 3 Insufficient cpu.",
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

func podRunning() *corev1.Pod {
	p := podPending()
	p.Name = "web-7d9f8b6c5d-q8m4z"
	p.UID = "3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a"
	p.ResourceVersion = "4802"
	p.Spec.NodeName = "node-a"
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(1)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(2)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(2)},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
		},
		HostIP:    "10.0.0.11",
		HostIPs:   []corev1.HostIP{{IP: "10.0.0.11"}},
		PodIP:     "10.244.1.17",
		PodIPs:    []corev1.PodIP{{IP: "10.244.1.17"}},
		StartTime: ptr(at(0)),
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:         "web",
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(1)}},
			Ready:        true,
			RestartCount: 0,
			Image:        "docker.io/library/nginx:1.27",
			ImageID:      "docker.io/library/nginx@sha256:0d3f2b1a",
			ContainerID:  "containerd://8c1e9b2f",
			Started:      ptr(true),
		}},
		QOSClass: corev1.PodQOSBurstable,
	}
	return p
}

func deployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	m := meta("web", "shop", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "5120", 2)
	m.Labels = labels
	m.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
	maxUnavailable := intstr.FromString("25%")
	maxSurge := intstr.FromString("25%")
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: m,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: template(labels),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
			},
			RevisionHistoryLimit:    ptr(int32(10)),
			ProgressDeadlineSeconds: ptr(int32(600)),
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration:  2,
			Replicas:            3,
			UpdatedReplicas:     3,
			ReadyReplicas:       2,
			AvailableReplicas:   2,
			UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: at(3), LastTransitionTime: at(3), Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: at(4), LastTransitionTime: at(0), Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-7d9f8b6c5d" has successfully progressed.`},
			},
		},
	}
}

// deploymentScaledToZero has replicas: 0 (a pointer to 0) and a status of
// zeros only.
func deploymentScaledToZero() *appsv1.Deployment {
	d := deployment()
	d.Name = "idle"
	d.UID = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b"
	d.Spec.Replicas = ptr(int32(0))
	d.Annotations = nil
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2}
	return d
}

func statefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	m := meta("db", "shop", "7e6d5c4b-3a29-4817-9f6e-5d4c3b2a1908", "6001", 1)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: m,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(0)),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    template(labels),
			ServiceName: "db",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					},
					VolumeMode: ptr(corev1.PersistentVolumeFilesystem),
				},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
			}},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0))},
			},
			RevisionHistoryLimit: ptr(int32(10)),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 1,
			CurrentRevision:    "db-5d8c7b6a49",
			UpdateRevision:     "db-5d8c7b6a49",
			CollisionCount:     ptr(int32(0)),
		},
	}
}

func job() *batchv1.Job {
	uid := "2a3b4c5d-6e7f-4081-9a2b-3c4d5e6f7a8b"
	labels := map[string]string{
		"batch.kubernetes.io/controller-uid": uid,
		"batch.kubernetes.io/job-name":       "migrate",
		"controller-uid":                     uid,
		"job-name":                           "migrate",
	}
	m := meta("migrate", "shop", uid, "7002", 1)
	m.Labels = labels
	tmpl := template(labels)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: m,
		Spec: batchv1.JobSpec{
			Parallelism:          ptr(int32(1)),
			Completions:          ptr(int32(1)),
			BackoffLimit:         ptr(int32(6)),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": uid}},
			ManualSelector:       nil,
			Template:             tmpl,
			CompletionMode:       ptr(batchv1.NonIndexedCompletion),
			Suspend:              ptr(false),
			PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed),
		},
		Status: batchv1.JobStatus{
			StartTime:               ptr(at(1)),
			Active:                  1,
			Ready:                   ptr(int32(0)),
			Terminating:             ptr(int32(0)),
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		},
	}
}

func service() *corev1.Service {
	m := meta("web", "shop", "4b5c6d7e-8f90-41a2-b3c4-d5e6f7a8b9c0", "5200", 0)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Protocol:   corev1.ProtocolTCP,
				Port:       80,
				TargetPort: intstr.FromInt32(8080),
			}},
			Selector:              map[string]string{"app": "web"},
			ClusterIP:             "10.96.12.34",
			ClusterIPs:            []string{"10.96.12.34"},
			Type:                  corev1.ServiceTypeClusterIP,
			SessionAffinity:       corev1.ServiceAffinityNone,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
			InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// headlessService has no ports and clusterIP "None".
func headlessService() *corev1.Service {
	m := meta("db", "shop", "5c6d7e8f-9012-43b4-85c6-d7e8f9a0b1c2", "5201", 0)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			Selector:              map[string]string{"app": "db"},
			ClusterIP:             corev1.ClusterIPNone,
			ClusterIPs:            []string{corev1.ClusterIPNone},
			Type:                  corev1.ServiceTypeClusterIP,
			SessionAffinity:       corev1.ServiceAffinityNone,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
			InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func node() *corev1.Node {
	m := meta("node-a", "", "8d9e0f1a-2b3c-44d5-96e7-f8091a2b3c4d", "9100", 0)
	m.Labels = map[string]string{"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux"}
	m.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: m,
		Spec: corev1.NodeSpec{
			PodCIDR:    "10.244.1.0/24",
			PodCIDRs:   []string{"10.244.1.0/24"},
			ProviderID: "kind://docker/kind/node-a",
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: at(5), LastTransitionTime: at(0), Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: at(5), LastTransitionTime: at(1), Reason: "KubeletReady", Message: "kubelet is posting ready status"},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.0.0.11"},
				{Type: corev1.NodeHostName, Address: "node-a"},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               "a1b2c3d4",
				SystemUUID:              "e5f6a7b8",
				BootID:                  "c9d0e1f2",
				KernelVersion:           "6.8.0",
				OSImage:                 "Debian GNU/Linux 12 (bookworm)",
				ContainerRuntimeVersion: "containerd://2.1.0",
				KubeletVersion:          "v1.35.0",
				KubeProxyVersion:        "",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
			Images: []corev1.ContainerImage{
				{Names: []string{"docker.io/library/nginx@sha256:0d3f2b1a", "docker.io/library/nginx:1.27"}, SizeBytes: 72099501},
			},
			RuntimeHandlers: []corev1.NodeRuntimeHandler{
				{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr(true), UserNamespaces: ptr(true)}},
				{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr(true), UserNamespaces: ptr(true)}},
			},
			Features: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr(true)},
		},
	}
}

// coreEvent is a core/v1 Event as kubelet-era recorders write it: the
// zero eventTime (JSON null), empty reportingComponent and instance.
func coreEvent() *corev1.Event {
	m := meta("web-7d9f8b6c5d-x2x7k.18a2b3c4d5e6f708", "shop", "0a1b2c3d-4e5f-4607-8192-a3b4c5d6e7f8", "8300", 0)
	return &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: m,
		InvolvedObject: corev1.ObjectReference{
			Kind:            "Pod",
			Namespace:       "shop",
			Name:            "web-7d9f8b6c5d-x2x7k",
			UID:             "6f1c2a9e-0d1b-4c57-9a53-0f3c1d2e4b01",
			APIVersion:      "v1",
			ResourceVersion: "4711",
		},
		Reason:         "FailedScheduling",
		Message:        "0/3 nodes are available: 3 Insufficient cpu.",
		Source:         corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: at(0),
		LastTimestamp:  at(2),
		Count:          3,
		Type:           corev1.EventTypeWarning,
	}
}

// eventsEvent is an events.k8s.io/v1 Event with eventTime set and the
// deprecated fields zero.
func eventsEvent() *eventsv1.Event {
	m := meta("web.18a2b3c4d5e6f709", "shop", "1b2c3d4e-5f60-4718-92a3-b4c5d6e7f809", "8301", 0)
	return &eventsv1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:          m,
		EventTime:           microAt(3),
		Series:              &eventsv1.EventSeries{Count: 2, LastObservedTime: microAt(4)},
		ReportingController: "example.com/web-operator",
		ReportingInstance:   "web-operator-6c5d4b3a2f-abcde",
		Action:              "Reconcile",
		Reason:              "ScaledUp",
		Regarding: corev1.ObjectReference{
			Kind:       "Deployment",
			Namespace:  "shop",
			Name:       "web",
			UID:        "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
			APIVersion: "apps/v1",
		},
		Note: "scaled up to 3 replicas",
		Type: corev1.EventTypeNormal,
	}
}

func configMap() *corev1.ConfigMap {
	m := meta("settings", "shop", "2c3d4e5f-6071-4829-a3b4-c5d6e7f8091a", "3100", 0)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: m,
		Data:       map[string]string{"mode": "fast", "empty": ""},
		BinaryData: map[string][]byte{"blob": {0, 1, 2, 255}},
	}
}

// configMapEmpty has no data at all (omitempty maps left nil).
func configMapEmpty() *corev1.ConfigMap {
	m := meta("kube-root-ca.crt-empty", "shop", "3d4e5f60-7182-493a-b4c5-d6e7f8091a2b", "3101", 0)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: m,
	}
}

func secret() *corev1.Secret {
	m := meta("db-credentials", "shop", "4e5f6071-8293-4a4b-85d6-e7f8091a2b3c", "3200", 0)
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: m,
		Data:       map[string][]byte{"password": []byte("s3cr3t"), "user": []byte("app")},
		Type:       corev1.SecretTypeOpaque,
	}
}

func lease() *coordinationv1.Lease {
	m := meta("web-operator-leader", "shop", "5f607182-93a4-4b5c-96e7-f8091a2b3c4d", "9900", 0)
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: m,
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("web-operator-6c5d4b3a2f-abcde"),
			LeaseDurationSeconds: ptr(int32(15)),
			AcquireTime:          ptr(microAt(1)),
			RenewTime:            ptr(microAt(5)),
			LeaseTransitions:     ptr(int32(0)),
		},
	}
}

func namespace() *corev1.Namespace {
	m := meta("shop", "", "60718293-a4b5-4c6d-87f8-091a2b3c4d5e", "300", 0)
	m.Labels = map[string]string{"kubernetes.io/metadata.name": "shop"}
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: m,
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

func clusterRole() *rbacv1.ClusterRole {
	m := meta("web-reader", "", "718293a4-b5c6-4d7e-98f9-1a2b3c4d5e6f", "400", 0)
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: m,
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "services"}},
			{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"web"}},
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
		},
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen <output directory>")
		os.Exit(2)
	}
	out := os.Args[1]

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		eventsv1.AddToScheme, coordinationv1.AddToScheme, rbacv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	js := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{})

	objects := []struct {
		name string
		obj  runtime.Object
	}{
		{"pod-pending", podPending()},
		{"pod-running", podRunning()},
		{"deployment", deployment()},
		{"deployment-zero-replicas", deploymentScaledToZero()},
		{"statefulset", statefulSet()},
		{"job", job()},
		{"service", service()},
		{"service-headless", headlessService()},
		{"node", node()},
		{"event-core", coreEvent()},
		{"event-events", eventsEvent()},
		{"configmap", configMap()},
		{"configmap-empty", configMapEmpty()},
		{"secret", secret()},
		{"lease", lease()},
		{"namespace", namespace()},
		{"clusterrole", clusterRole()},
	}
	for _, o := range objects {
		var b bytes.Buffer
		if err := pb.Encode(o.obj, &b); err != nil {
			panic(fmt.Sprintf("%s: protobuf: %v", o.name, err))
		}
		if err := os.WriteFile(filepath.Join(out, o.name+".pb"), b.Bytes(), 0o644); err != nil {
			panic(err)
		}
		b.Reset()
		if err := js.Encode(o.obj, &b); err != nil {
			panic(fmt.Sprintf("%s: json: %v", o.name, err))
		}
		if err := os.WriteFile(filepath.Join(out, o.name+".json"), b.Bytes(), 0o644); err != nil {
			panic(err)
		}
	}
}
