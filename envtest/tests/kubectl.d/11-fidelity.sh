# Issue 11 (envtest refuses what a real API server refuses): defaults on
# read, allOf/anyOf/oneOf/not, CEL type checks and cost budgets, as kubectl
# shows them.

fidelity_crd() { # <size property JSON> <extra spec-level keys JSON>
  cat <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: fidelities.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: fidelities, singular: fidelity, kind: Fidelity}
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
              cron: {type: string}
              interval: {type: integer}
              size: $1
            $2
YAML
}

fidelity_crd '{type: integer}' '' >"$WORK/fidelity-crd.yaml"
kubectl apply -f "$WORK/fidelity-crd.yaml" >/dev/null
kubectl wait --for condition=established --timeout=10s crd/fidelities.example.com >/dev/null
cat >"$WORK/fidelity.yaml" <<'YAML'
apiVersion: example.com/v1
kind: Fidelity
metadata: {name: old}
spec: {cron: "* * * * *"}
YAML
kubectl apply -f "$WORK/fidelity.yaml" >/dev/null

# The CRD gains a default and an anyOf: the stored object shows the default.
fidelity_crd '{type: integer, default: 3}' 'anyOf: [{required: [cron]}, {required: [interval]}]' >"$WORK/fidelity-crd.yaml"
kubectl apply -f "$WORK/fidelity-crd.yaml" >/dev/null
out=$(kubectl get fidelity old -o jsonpath='{.spec.size}')
[ "$out" = 3 ] || fail "default applied on read: got [$out]"
pass "a default added to the CRD shows on kubectl get of an object stored before"

cat >"$WORK/fidelity-bad.yaml" <<'YAML'
apiVersion: example.com/v1
kind: Fidelity
metadata: {name: neither}
spec: {size: 1}
YAML
out=$(kubectl apply -f "$WORK/fidelity-bad.yaml" 2>&1 || true)
expect_contains "anyOf refused by kubectl apply" "must validate at least one schema (anyOf)" "$out"

# A junctor that carries a type is not structural.
fidelity_crd '{type: integer}' 'not: {type: object, required: [cron]}' >"$WORK/fidelity-crd.yaml"
out=$(kubectl apply -f "$WORK/fidelity-crd.yaml" 2>&1 || true)
expect_contains "typed junctor refused" "not.type: Forbidden: must be empty to be structural" "$out"

# CEL: an undeclared field and an unbounded nested loop are refused.
fidelity_crd '{type: integer}' "x-kubernetes-validations: [{rule: 'self.intervl > 0'}]" >"$WORK/fidelity-crd.yaml"
out=$(kubectl apply -f "$WORK/fidelity-crd.yaml" 2>&1 || true)
expect_contains "CEL undefined field refused" "undefined field 'intervl'" "$out"
fidelity_crd '{type: array, items: {type: string}}' "x-kubernetes-validations: [{rule: 'self.size.all(a, self.size.all(b, a == b))'}]" >"$WORK/fidelity-crd.yaml"
out=$(kubectl apply -f "$WORK/fidelity-crd.yaml" 2>&1 || true)
expect_contains "CEL over budget refused" "estimated rule cost exceeds budget by factor of" "$out"

kubectl delete crd fidelities.example.com >/dev/null
