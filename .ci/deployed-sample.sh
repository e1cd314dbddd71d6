#!/usr/bin/env bash
# A deployed sample operator on the "existing cluster" of .ci/run, which
# tests in existing-cluster mode must leave as it is.
#
#   .ci/deployed-sample.sh deploy   KUBECONFIG SAMPLE_CONTROLLER_BIN
#   .ci/deployed-sample.sh snapshot KUBECONFIG
#   .ci/deployed-sample.sh names
#
# deploy: the sample's CRD (as `sample-controller --print-crd` writes it:
# the file of its `manifests` binary, whose name a scaffolded project built
# into the same target directory also uses) with one
# more field in every version's spec schema (`tier`), a Foo `prod/live`
# that sets it, and the sample's RBAC (ClusterRole and ClusterRoleBinding
# `foo-controller`, ServiceAccount `default/foo-controller`).
# snapshot: each of those objects as `kind/name uid resourceVersion body`
# (its metadata and the CRD's status left out of the body), one a line, to
# compare before and after the tests.
# names: the `kubectl get -o name` of the deployed CRD.
# Uses $KUBECTL (default: kubectl).
set -euo pipefail
kubectl="${KUBECTL:-kubectl}"
crd=foos.samplecontroller.k8s.io

case "$1" in
names)
  echo "customresourcedefinition.apiextensions.k8s.io/$crd"
  ;;
deploy)
  kc="$2" sample="$3"
  k() { "$kubectl" --kubeconfig "$kc" "$@"; }
  # The CRD as JSON (kubectl converts; nothing is sent), plus `tier`.
  "$sample" --print-crd \
    | k create --dry-run=client -o json -f - \
    | python3 -c '
import json, sys
crd = json.load(sys.stdin)
for v in crd["spec"]["versions"]:
    spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["tier"] = {"type": "string", "description": "Only the deployed operator has it."}
json.dump(crd, sys.stdout)
' | k create -f -
  k wait --for condition=Established --timeout=60s "crd/$crd"
  k create namespace prod
  # Retried: the new kind may take a moment to be served.
  for _ in $(seq 1 50); do
    if k create -n prod -f - <<'EOF'
apiVersion: samplecontroller.k8s.io/v1
kind: Foo
metadata:
  name: live
spec:
  deploymentName: live-web
  replicas: 2
  tier: gold
EOF
    then break; fi
    sleep 0.2
  done
  "$sample" --print-rbac | k create -f -
  ;;
snapshot)
  kc="$2"
  for obj in "crd/$crd" "foo/live -n prod" "clusterrole/foo-controller" \
    "clusterrolebinding/foo-controller" "serviceaccount/foo-controller -n default"; do
    # shellcheck disable=SC2086 # "name -n ns" splits on purpose
    if ! json="$("$kubectl" --kubeconfig "$kc" get $obj -o json)"; then
      echo "$obj missing"
      continue
    fi
    printf '%s' "$json" | python3 -c '
import json, sys
o = json.load(sys.stdin)
m = o.pop("metadata")
if o.get("kind") == "CustomResourceDefinition":
    o.pop("status", None)
print("%s/%s %s %s %s" % (o["kind"], m["name"], m["uid"], m["resourceVersion"], json.dumps(o, sort_keys=True)))
'
  done
  ;;
*)
  echo "usage: $0 deploy KUBECONFIG MANIFESTS_BIN | snapshot KUBECONFIG | names" >&2
  exit 2
  ;;
esac
