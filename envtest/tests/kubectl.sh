#!/usr/bin/env bash
# Drives a real kubectl against envtest-server the way a user would and
# checks what it prints. Usage: envtest/tests/kubectl.sh path/to/envtest-server
# Exits non-zero on the first failed check; always stops the server.
set -euo pipefail

SERVER_BIN=${1:?usage: kubectl.sh path/to/envtest-server}
command -v kubectl >/dev/null || { echo "kubectl not found on PATH" >&2; exit 1; }

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -INT "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }
# expect_contains <description> <needle> <haystack>
expect_contains() {
  case "$3" in
    *"$2"*) pass "$1" ;;
    *) fail "$1: expected to find [$2] in output:
$3" ;;
  esac
}
expect_not_contains() {
  case "$3" in
    *"$2"*) fail "$1: did not expect [$2] in output:
$3" ;;
    *) pass "$1" ;;
  esac
}

# Start the server on a free port (port 0) and wait for its kubeconfig.
export KUBECONFIG="$WORK/kubeconfig"
"$SERVER_BIN" --port 0 --kubeconfig "$KUBECONFIG" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  [ -s "$KUBECONFIG" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; fail "server exited early"; }
  sleep 0.1
done
[ -s "$KUBECONFIG" ] || fail "server did not write a kubeconfig"
out=$(cat "$WORK/server.log")
expect_contains "server prints how to point kubectl at it" "export KUBECONFIG=" "$out"

# Discovery and cluster-scoped resources.
out=$(kubectl version -o json)
expect_contains "kubectl version sees the server" '"serverVersion"' "$out"
out=$(kubectl get namespaces)
expect_contains "default namespace listed" "default" "$out"
expect_contains "kube-system namespace listed" "kube-system" "$out"
out=$(kubectl api-resources)
expect_contains "api-resources lists deployments" "deployments" "$out"
expect_contains "api-resources lists short names" "cm" "$out"
kubectl get all >/dev/null
pass "get all (categories)"

# create -f, namespaced and in another namespace.
cat >"$WORK/ns.yaml" <<'YAML'
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
YAML
cat >"$WORK/cms.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  labels: {app: web, tier: front}
data: {color: blue}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: db-config
  labels: {app: db}
data: {size: large}
YAML
kubectl create -f "$WORK/ns.yaml" >/dev/null
out=$(kubectl create -f "$WORK/cms.yaml")
expect_contains "create -f creates the first object" "configmap/web-config created" "$out"
expect_contains "create -f creates the second object" "configmap/db-config created" "$out"
kubectl create -f "$WORK/cms.yaml" -n team-a >/dev/null
if kubectl create -f "$WORK/cms.yaml" >"$WORK/dup.out" 2>&1; then fail "creating a duplicate succeeded"; fi
expect_contains "duplicate create reports AlreadyExists" "already exists" "$(cat "$WORK/dup.out")"

# get: namespaced, -A, -l, -o json / yaml / jsonpath.
out=$(kubectl get configmaps)
expect_contains "get lists web-config" "web-config" "$out"
expect_contains "get prints a NAME column" "NAME" "$out"
out=$(kubectl get configmaps -A)
expect_contains "get -A shows the other namespace" "team-a" "$out"
[ "$(kubectl get configmaps -A --no-headers | wc -l)" -eq 4 ] || fail "get -A should list 4 configmaps"
pass "get -A lists every namespace's objects"
out=$(kubectl get configmaps -l app=web -o name)
[ "$out" = "configmap/web-config" ] || fail "get -l app=web gave [$out]"
pass "get -l filters by label"
out=$(kubectl get configmaps -l 'app in (web,db),tier!=front' -o name)
[ "$out" = "configmap/db-config" ] || fail "set-based selector gave [$out]"
pass "get -l with set-based selector"
out=$(kubectl get configmap web-config -o json)
expect_contains "get -o json" '"color": "blue"' "$out"
out=$(kubectl get configmap web-config -o yaml)
expect_contains "get -o yaml" "color: blue" "$out"
out=$(kubectl get configmap web-config -o jsonpath='{.metadata.generation}')
[ "$out" = "1" ] || fail "generation should be 1, got [$out]"
pass "create sets generation 1"
out=$(kubectl get configmaps --field-selector metadata.name=db-config -o name)
[ "$out" = "configmap/db-config" ] || fail "field selector gave [$out]"
pass "get --field-selector"
if kubectl get configmap missing >"$WORK/nf.out" 2>&1; then fail "get of a missing object succeeded"; fi
expect_contains "missing object is NotFound" 'configmaps "missing" not found' "$(cat "$WORK/nf.out")"

# label and patch --type merge.
kubectl label configmap web-config release=v2 >/dev/null
out=$(kubectl get configmaps -l release=v2 -o name)
[ "$out" = "configmap/web-config" ] || fail "label did not apply: [$out]"
pass "label"
kubectl patch configmap web-config --type merge -p '{"data":{"color":"green"}}' >/dev/null
out=$(kubectl get configmap web-config -o jsonpath='{.data.color}')
[ "$out" = "green" ] || fail "merge patch gave [$out]"
pass "patch --type merge"
kubectl patch configmap web-config --type json -p '[{"op":"add","path":"/data/extra","value":"1"}]' >/dev/null
out=$(kubectl get configmap web-config -o jsonpath='{.data.extra}')
[ "$out" = "1" ] || fail "json patch gave [$out]"
pass "patch --type json"
kubectl apply -f "$WORK/cms.yaml" >/dev/null 2>&1
out=$(kubectl apply -f "$WORK/cms.yaml")
expect_contains "apply twice is unchanged" "unchanged" "$out"

# get -w: run a watch in the background with a timeout, then change things.
timeout 8 kubectl get configmaps -w --output-watch-events -o name >"$WORK/watch.out" 2>&1 &
WATCH_PID=$!
for _ in $(seq 1 50); do
  grep -q "web-config" "$WORK/watch.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "web-config" "$WORK/watch.out" || fail "watch did not print the initial list"
kubectl create -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: watched}
YAML
kubectl delete configmap watched >/dev/null
for _ in $(seq 1 50); do
  [ "$(grep -c "configmap/watched" "$WORK/watch.out" 2>/dev/null)" -ge 2 ] && break
  sleep 0.1
done
kill "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
out=$(cat "$WORK/watch.out")
[ "$(grep -c "configmap/watched" "$WORK/watch.out")" -ge 2 ] || fail "get -w should show the object added and deleted:
$out"
pass "get -w shows the object being added and deleted"

# delete.
out=$(kubectl delete configmap db-config)
expect_contains "delete reports deletion" "deleted" "$out"
out=$(kubectl get configmaps -o name)
expect_not_contains "deleted object is gone" "db-config" "$out"

# A CRD, then custom resources.
cat >"$WORK/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
YAML
cat >"$WORK/widgets.yaml" <<'YAML'
apiVersion: example.com/v1
kind: Widget
metadata: {name: sprocket, labels: {size: big}}
spec: {color: red}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: gear, labels: {size: small}}
spec: {color: blue}
YAML
kubectl create -f "$WORK/crd.yaml" >/dev/null
kubectl wait --for condition=established --timeout=10s crd/widgets.example.com >/dev/null
pass "CRD becomes established"
out=$(kubectl create -f "$WORK/widgets.yaml")
expect_contains "custom resources are created" "widget.example.com/sprocket created" "$out"
out=$(kubectl get widgets)
expect_contains "get widgets shows printer columns" "COLOR" "$out"
expect_contains "get widgets shows the color" "red" "$out"
[ "$(kubectl get widgets | head -1 | grep -o AGE | wc -l)" -eq 1 ] || fail "AGE column shown more than once:
$(kubectl get widgets)"
pass "a CRD's own Age column is shown once"
out=$(kubectl get wd -l size=small -o name)
[ "$out" = "widget.example.com/gear" ] || fail "short name + label selector gave [$out]"
pass "short name and label selector for custom resources"
out=$(kubectl get widget sprocket -o yaml)
expect_contains "custom resource -o yaml" "color: red" "$out"
kubectl patch widget sprocket --type merge -p '{"spec":{"color":"green"}}' >/dev/null
out=$(kubectl get widget sprocket -o jsonpath='{.spec.color}/{.metadata.generation}')
[ "$out" = "green/2" ] || fail "custom resource patch gave [$out]"
pass "custom resource patch bumps generation"
kubectl delete widget gear >/dev/null
out=$(kubectl get widgets -o name)
[ "$out" = "widget.example.com/sprocket" ] || fail "after delete: [$out]"
pass "custom resource delete"
kubectl delete crd widgets.example.com >/dev/null
if kubectl get widgets >"$WORK/nocrd.out" 2>&1; then fail "widgets still served after CRD deletion"; fi
pass "deleting the CRD stops serving its resource"

# What a real API server refuses, envtest refuses.
cat >"$WORK/typo.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: typo}
dta: {color: red}
YAML
if kubectl create -f "$WORK/typo.yaml" >"$WORK/typo.out" 2>&1; then fail "a ConfigMap with an unknown field was created"; fi
expect_contains "create refuses unknown fields (fieldValidation=Strict)" 'unknown field "dta"' "$(cat "$WORK/typo.out")"
cat >"$WORK/mistyped.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: mistyped}
data: {count: 5}
YAML
if kubectl create -f "$WORK/mistyped.yaml" >"$WORK/mistyped.out" 2>&1; then fail "a ConfigMap with a number in data was created"; fi
expect_contains "create refuses a mistyped field with its path" "data.count" "$(cat "$WORK/mistyped.out")"
if kubectl patch configmap web-config --type merge -p '{"metadata":{"uid":"changed"}}' >"$WORK/uid.out" 2>&1; then fail "uid was changed"; fi
expect_contains "uid is immutable" "field is immutable" "$(cat "$WORK/uid.out")"
if kubectl patch configmap web-config --type merge -p '{"metadata":{"labels":{"-bad/key/x":"v"}}}' >"$WORK/label.out" 2>&1; then fail "a malformed label key was accepted"; fi
expect_contains "malformed label keys are refused" "metadata.labels" "$(cat "$WORK/label.out")"
cat >"$WORK/gadgets.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              name: {type: string, pattern: '^[a-z]+$'}
              replicas: {type: integer, default: 1}
YAML
kubectl create -f "$WORK/gadgets.yaml" >/dev/null
kubectl wait --for condition=established --timeout=10s crd/gadgets.example.com >/dev/null
if kubectl create -f - >"$WORK/pattern.out" 2>&1 <<'YAML'
apiVersion: example.com/v1
kind: Gadget
metadata: {name: upper}
spec: {name: UPPER-123}
YAML
then fail "a value not matching the schema pattern was accepted"; fi
expect_contains "schema pattern is enforced" "spec.name" "$(cat "$WORK/pattern.out")"
kubectl create -f - >/dev/null <<'YAML'
apiVersion: example.com/v1
kind: Gadget
metadata: {name: lower}
spec: {name: lower}
YAML
out=$(kubectl get gadget lower -o jsonpath='{.spec.replicas}')
[ "$out" = "1" ] || fail "schema default not applied: [$out]"
pass "schema defaults are applied"
sed 's/name: gadgets.example.com/name: cels.example.com/; s/plural: gadgets, singular: gadget, kind: Gadget/plural: cels, singular: cel, kind: Cel/; s/            type: object$/            type: object\n            x-kubernetes-validations: [{rule: "self.replicas < 10", message: "replicas must be under 10"}]/' \
  "$WORK/gadgets.yaml" >"$WORK/cel.yaml"
kubectl create -f "$WORK/cel.yaml" >/dev/null
kubectl wait --for condition=established --timeout=10s crd/cels.example.com >/dev/null
if kubectl create -f - >"$WORK/cel.out" 2>&1 <<'YAML'
apiVersion: example.com/v1
kind: Cel
metadata: {name: big}
spec: {name: big, replicas: 12}
YAML
then fail "an object violating a CEL rule was accepted"; fi
expect_contains "CEL rules are enforced with their message" "replicas must be under 10" "$(cat "$WORK/cel.out")"
sed 's/cels.example.com/badcels.example.com/; s/plural: cels, singular: cel, kind: Cel/plural: badcels, singular: badcel, kind: BadCel/; s/rule: "self.replicas < 10"/rule: "self.replicas <"/' \
  "$WORK/cel.yaml" >"$WORK/badcel.yaml"
if kubectl create -f "$WORK/badcel.yaml" >"$WORK/badcel.out" 2>&1; then fail "a CRD with a malformed CEL rule was accepted"; fi
expect_contains "malformed CEL rules are refused at CRD write" "x-kubernetes-validations[0].rule" "$(cat "$WORK/badcel.out")"

# Topic scripts: each file in kubectl.d/ is sourced in name order with the
# helpers above, the running server and KUBECONFIG in scope.
shopt -s nullglob
for topic in "$(dirname "${BASH_SOURCE[0]}")"/kubectl.d/*.sh; do
  # shellcheck source=/dev/null
  source "$topic"
done
shopt -u nullglob

# Deleting a namespace deletes its contents.
kubectl delete namespace team-a >/dev/null
out=$(kubectl get configmaps -A -o name)
[ "$(kubectl get configmaps -n team-a -o name | wc -l)" -eq 0 ] || fail "team-a still has configmaps"
pass "namespace deletion removes its objects"

echo "all kubectl checks passed"
