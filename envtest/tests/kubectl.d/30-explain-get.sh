# kubectl explain (real OpenAPI v3 schemas for built-in kinds and custom
# resources) and kubectl get showing each kind's columns (server-side tables).
# Sourced by ../kubectl.sh.

# explain: built-in kinds, a field, a nested field.
out=$(kubectl explain configmap)
expect_contains "explain configmap describes the kind" "ConfigMap holds configuration data" "$out"
expect_contains "explain configmap lists its fields" "binaryData" "$out"
out=$(kubectl explain configmap.data)
expect_contains "explain configmap.data describes the field" "Data contains the configuration data" "$out"
out=$(kubectl explain deployment.spec.replicas)
expect_contains "explain deployment.spec.replicas" "Number of desired pods" "$out"
out=$(kubectl explain pod.spec.containers.image)
expect_contains "explain follows references into nested kinds" "Container image name" "$out"

# explain: a custom resource, from its CRD's openAPIV3Schema.
cat >"$WORK/gizmo-crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Shape, type: string, jsonPath: .spec.shape, priority: 1, description: The gizmo's outline.}
    schema:
      openAPIV3Schema:
        type: object
        description: A Gizmo is a small machine the shop sells.
        properties:
          spec:
            type: object
            description: What the gizmo should be.
            properties:
              size:
                type: integer
                description: How many cogs the gizmo has.
              shape:
                type: string
YAML
kubectl apply -f "$WORK/gizmo-crd.yaml" >/dev/null
kubectl wait --for condition=established --timeout=10s crd/gizmos.example.com >/dev/null
out=$(kubectl explain gizmo)
expect_contains "explain a custom resource" "A Gizmo is a small machine the shop sells." "$out"
out=$(kubectl explain gizmo.spec.size)
expect_contains "explain a custom resource's field" "How many cogs the gizmo has." "$out"
out=$(kubectl explain gizmo.metadata.name)
expect_contains "a custom resource's metadata is ObjectMeta" "Name must be unique within a namespace" "$out"

# A changed CRD schema is what explain shows next (the document's hash changes).
sed 's/How many cogs the gizmo has./How many cogs the gizmo turns./' "$WORK/gizmo-crd.yaml" >"$WORK/gizmo-crd2.yaml"
kubectl apply -f "$WORK/gizmo-crd2.yaml" >/dev/null
out=$(kubectl explain gizmo.spec.size)
expect_contains "explain follows a changed CRD schema" "How many cogs the gizmo turns." "$out"

# get: each kind's columns.
cat >"$WORK/shop.yaml" <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prices, namespace: shop}
data: {apple: "1", pear: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: shop}
type: Opaque
stringData: {token: abc}
---
apiVersion: v1
kind: Service
metadata: {name: front, namespace: shop}
spec:
  selector: {app: front}
  ports: [{port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Pod
metadata: {name: front-0, namespace: shop}
spec:
  containers: [{name: app, image: nginx:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: front, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front}}
    spec:
      containers: [{name: app, image: nginx:1}]
---
apiVersion: v1
kind: Event
metadata: {name: front-0.started, namespace: shop}
involvedObject: {kind: Pod, name: front-0, namespace: shop}
type: Normal
reason: Started
message: Started container app
---
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: cog, namespace: shop}
spec: {size: 7, shape: round}
YAML
kubectl apply -f "$WORK/shop.yaml" >/dev/null

out=$(kubectl get pods -n shop)
expect_contains "get pods shows READY STATUS RESTARTS" "NAME      READY   STATUS" "$out"
expect_contains "get pods shows RESTARTS AGE" "RESTARTS   AGE" "$out"
expect_contains "get pods counts ready containers" "0/1" "$out"
out=$(kubectl get pods -n shop -o wide)
expect_contains "get pods -o wide adds IP and NODE" "IP       NODE" "$out"
out=$(kubectl get svc -n shop)
expect_contains "get svc shows TYPE CLUSTER-IP EXTERNAL-IP PORT(S)" "TYPE        CLUSTER-IP" "$out"
expect_contains "get svc shows the ports" "80/TCP" "$out"
expect_contains "get svc shows ClusterIP" "ClusterIP" "$out"
out=$(kubectl get cm prices -n shop)
expect_contains "get cm shows DATA" "DATA   AGE" "$out"
expect_contains "get cm counts entries" "prices   2" "$out"
out=$(kubectl get secrets -n shop)
expect_contains "get secrets shows TYPE DATA" "TYPE     DATA" "$out"
expect_contains "get secrets shows the type" "Opaque" "$out"
out=$(kubectl get ns shop)
expect_contains "get ns shows STATUS" "STATUS   AGE" "$out"
expect_contains "get ns shows Active" "Active" "$out"
out=$(kubectl get events -n shop)
expect_contains "get events shows LAST SEEN TYPE REASON OBJECT MESSAGE" "TYPE     REASON    OBJECT        MESSAGE" "$out"
expect_contains "get events names the object" "pod/front-0" "$out"
out=$(kubectl get deploy -n shop)
expect_contains "get deploy shows READY UP-TO-DATE AVAILABLE" "READY   UP-TO-DATE   AVAILABLE" "$out"
expect_contains "get deploy shows ready/desired" "0/2" "$out"
out=$(kubectl get gizmos -n shop)
expect_contains "custom resources keep their printer columns" "SIZE" "$out"
expect_contains "custom resource printer column value" "7" "$out"
expect_not_contains "a priority-1 printer column is hidden without -o wide" "SHAPE" "$out"
out=$(kubectl get gizmos -n shop -o wide)
expect_contains "-o wide shows a priority-1 printer column" "SHAPE" "$out"
expect_contains "-o wide shows the priority-1 column's value" "round" "$out"
out=$(kubectl get crd gizmos.example.com)
expect_contains "get crd shows CREATED AT" "CREATED AT" "$out"

kubectl delete namespace shop >/dev/null
kubectl delete crd gizmos.example.com >/dev/null
pass "explain and get cleanup"
