# kubectl's imperative `create` subcommands, for every kind envtest serves.
# kubectl sends these built-in kinds as protobuf and asks for protobuf back,
# so each one checks the protobuf path end to end; `get -o yaml` then reads
# them back as JSON. (ingress, poddisruptionbudget, priorityclass, quota and
# token name kinds envtest does not serve.)
ns=create-demo
out=$(kubectl create namespace "$ns")
expect_contains "create namespace" "namespace/$ns created" "$out"

out=$(kubectl -n "$ns" create configmap app-config --from-literal=mode=fast --from-literal=level=3)
expect_contains "create configmap" "configmap/app-config created" "$out"
out=$(kubectl -n "$ns" get configmap app-config -o yaml)
expect_contains "configmap data read back" "mode: fast" "$out"
expect_contains "configmap quoted number read back" 'level: "3"' "$out"

printf 's3cr3t\001\377' >"$WORK/blob.bin"
out=$(kubectl -n "$ns" create secret generic creds --from-literal=user=admin --from-file=blob="$WORK/blob.bin")
expect_contains "create secret generic" "secret/creds created" "$out"
out=$(kubectl -n "$ns" get secret creds -o jsonpath='{.data.user}')
[ "$out" = "$(printf admin | base64)" ] || fail "secret string data read back as [$out]"
out=$(kubectl -n "$ns" get secret creds -o jsonpath='{.data.blob}')
[ "$out" = "$(base64 <"$WORK/blob.bin")" ] || fail "secret binary data read back as [$out]"
pass "secret bytes (not UTF-8) survive protobuf"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=web \
  -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null || fail "openssl could not make a key pair"
out=$(kubectl -n "$ns" create secret tls web-tls --cert="$WORK/tls.crt" --key="$WORK/tls.key")
expect_contains "create secret tls" "secret/web-tls created" "$out"
out=$(kubectl -n "$ns" get secret web-tls -o jsonpath='{.type}')
[ "$out" = "kubernetes.io/tls" ] || fail "tls secret type is [$out]"
out=$(kubectl -n "$ns" create secret docker-registry pull --docker-server=registry.example --docker-username=u --docker-password=p)
expect_contains "create secret docker-registry" "secret/pull created" "$out"
out=$(kubectl -n "$ns" get secret pull -o jsonpath='{.type}')
[ "$out" = "kubernetes.io/dockerconfigjson" ] || fail "docker-registry secret type is [$out]"

out=$(kubectl -n "$ns" create serviceaccount builder)
expect_contains "create serviceaccount" "serviceaccount/builder created" "$out"

out=$(kubectl -n "$ns" create deployment web --image=nginx:1.27 --replicas=2 --port=8080)
expect_contains "create deployment" "deployment.apps/web created" "$out"
out=$(kubectl -n "$ns" get deployment web -o yaml)
expect_contains "deployment replicas read back" "replicas: 2" "$out"
expect_contains "deployment container port read back" "containerPort: 8080" "$out"
expect_contains "deployment image read back" "image: nginx:1.27" "$out"

out=$(kubectl -n "$ns" create service clusterip web --tcp=80:8080)
expect_contains "create service clusterip" "service/web created" "$out"
out=$(kubectl -n "$ns" get service web -o jsonpath='{.spec.ports[0].targetPort}')
[ "$out" = "8080" ] || fail "service targetPort (IntOrString) read back as [$out]"
out=$(kubectl -n "$ns" create service nodeport web-np --tcp=80:http)
expect_contains "create service nodeport" "service/web-np created" "$out"
out=$(kubectl -n "$ns" get service web-np -o jsonpath='{.spec.type}/{.spec.ports[0].targetPort}')
[ "$out" = "NodePort/http" ] || fail "nodeport service read back as [$out]"
out=$(kubectl -n "$ns" create service loadbalancer web-lb --tcp=443:8443)
expect_contains "create service loadbalancer" "service/web-lb created" "$out"
out=$(kubectl -n "$ns" create service externalname ext --external-name=db.example.com)
expect_contains "create service externalname" "service/ext created" "$out"

out=$(kubectl -n "$ns" create cronjob nightly --image=busybox --schedule='0 3 * * *' -- echo hi)
expect_contains "create cronjob" "cronjob.batch/nightly created" "$out"
out=$(kubectl -n "$ns" create job once --image=busybox -- echo hi)
expect_contains "create job" "job.batch/once created" "$out"
out=$(kubectl -n "$ns" create job from-cron --from=cronjob/nightly)
expect_contains "create job --from=cronjob" "job.batch/from-cron created" "$out"
out=$(kubectl -n "$ns" get job once -o yaml)
expect_contains "job command read back" "- echo" "$out"

out=$(kubectl -n "$ns" create role reader --verb=get,list --resource=configmaps,pods)
expect_contains "create role" "role.rbac.authorization.k8s.io/reader created" "$out"
out=$(kubectl create clusterrole viewer --verb=get --resource=namespaces)
expect_contains "create clusterrole" "clusterrole.rbac.authorization.k8s.io/viewer created" "$out"
out=$(kubectl -n "$ns" create rolebinding read-it --role=reader --serviceaccount="$ns:builder")
expect_contains "create rolebinding" "rolebinding.rbac.authorization.k8s.io/read-it created" "$out"
out=$(kubectl create clusterrolebinding view-it --clusterrole=viewer --user=alice)
expect_contains "create clusterrolebinding" "clusterrolebinding.rbac.authorization.k8s.io/view-it created" "$out"
out=$(kubectl -n "$ns" get role reader -o yaml)
expect_contains "role rules read back" "- configmaps" "$out"

# The same objects listed in protobuf (kubectl get -o name asks for it).
out=$(kubectl -n "$ns" get configmaps,secrets,serviceaccounts,deployments,services,jobs,cronjobs,roles,rolebindings -o name)
for want in configmap/app-config secret/creds serviceaccount/builder deployment.apps/web service/web \
  job.batch/once cronjob.batch/nightly role.rbac.authorization.k8s.io/reader rolebinding.rbac.authorization.k8s.io/read-it; do
  expect_contains "listed $want" "$want" "$out"
done
# Errors come back readable too.
if out=$(kubectl create namespace "$ns" 2>&1); then fail "a duplicate namespace was created"; fi
expect_contains "duplicate create is AlreadyExists" "already exists" "$out"

kubectl delete namespace "$ns" >/dev/null
kubectl delete clusterrole viewer >/dev/null
kubectl delete clusterrolebinding view-it >/dev/null
