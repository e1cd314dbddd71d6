# kubectl apply --server-side with two field managers sharing a Deployment's
# containers by name: both containers are kept, a conflicting image is
# refused naming the container's path, and --force-conflicts takes it.
ssa_deploy() { # <manager> <containers yaml> [extra kubectl flags]
  cat >"$WORK/ssa.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: ssa-web}
spec:
  selector: {matchLabels: {app: ssa-web}}
  template:
    metadata: {labels: {app: ssa-web}}
    spec:
      containers:
$2
YAML
  kubectl apply --server-side --field-manager="$1" ${3:-} -f "$WORK/ssa.yaml" 2>&1
}
out=$(ssa_deploy team '      - {name: app, image: "app:1"}')
expect_contains "server-side apply creates" "serverside-applied" "$out"
out=$(ssa_deploy injector '      - {name: proxy, image: "proxy:1"}')
expect_contains "a second manager applies its own container" "serverside-applied" "$out"
out=$(kubectl get deployment ssa-web -o jsonpath='{.spec.template.spec.containers[*].name}')
expect_contains "both managers' containers are kept" "app proxy" "$out"
out=$(ssa_deploy injector '      - {name: proxy, image: "proxy:1"}
      - {name: app, image: "app:2"}' || true)
expect_contains "a conflicting image is refused" 'conflict with "team"' "$out"
expect_contains "the conflict names the container" '.spec.template.spec.containers[name="app"].image' "$out"
out=$(ssa_deploy injector '      - {name: proxy, image: "proxy:1"}
      - {name: app, image: "app:2"}' --force-conflicts)
expect_contains "--force-conflicts takes the field" "serverside-applied" "$out"
out=$(kubectl get deployment ssa-web -o jsonpath='{.spec.template.spec.containers[?(@.name=="app")].image}')
expect_contains "the forced image is stored" "app:2" "$out"
kubectl delete deployment ssa-web >/dev/null
