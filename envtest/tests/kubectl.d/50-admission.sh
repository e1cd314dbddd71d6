# Admission through kubectl: `kubectl apply -f` of a validating webhook
# configuration (served by a small Python HTTPS webhook with its own CA made
# by openssl) and of a ValidatingAdmissionPolicy with its binding; a
# `kubectl create` each of them denies prints its message; tables and explain
# for the new kinds.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=hook-ca \
  -keyout "$WORK/hook-ca.key" -out "$WORK/hook-ca.crt" 2>/dev/null || fail "openssl: CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=hook \
  -keyout "$WORK/hook.key" -out "$WORK/hook.csr" 2>/dev/null || fail "openssl: key"
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' >"$WORK/hook.ext"
openssl x509 -req -in "$WORK/hook.csr" -CA "$WORK/hook-ca.crt" -CAkey "$WORK/hook-ca.key" \
  -CAcreateserial -days 1 -extfile "$WORK/hook.ext" -out "$WORK/hook.crt" 2>/dev/null || fail "openssl: sign"

cat >"$WORK/hook.py" <<'PY'
import http.server, json, ssl, sys

class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        name = review["request"].get("name", "")
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False,
                "status": {"code": 403, "reason": "Forbidden",
                    "message": "configmap %s: names starting with forbidden- are not allowed" % name}}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = ctx.wrap_socket(server.socket, server_side=True)
with open(sys.argv[3], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
PY
python3 "$WORK/hook.py" "$WORK/hook.crt" "$WORK/hook.key" "$WORK/hook.port" >"$WORK/hook.log" 2>&1 &
HOOK_PID=$!
for _ in $(seq 1 100); do
  [ -s "$WORK/hook.port" ] && break
  sleep 0.1
done
[ -s "$WORK/hook.port" ] || { kill "$HOOK_PID" 2>/dev/null; fail "the webhook did not start: $(cat "$WORK/hook.log")"; }
HOOK_PORT=$(cat "$WORK/hook.port")

cat >"$WORK/webhook.yaml" <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: forbidden-names
webhooks:
- name: forbidden-names.envtest.example
  clientConfig:
    url: https://127.0.0.1:${HOOK_PORT}/validate
    caBundle: $(base64 <"$WORK/hook-ca.crt" | tr -d '\n')
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
  matchConditions:
  - name: forbidden-prefix
    expression: "object.metadata.name.startsWith('forbidden-')"
  sideEffects: None
  admissionReviewVersions: ["v1"]
  timeoutSeconds: 5
YAML
out=$(kubectl apply -f "$WORK/webhook.yaml")
expect_contains "apply a validating webhook configuration" "validatingwebhookconfiguration.admissionregistration.k8s.io/forbidden-names created" "$out"
out=$(kubectl get validatingwebhookconfigurations)
expect_contains "webhook configurations list their webhook count" "forbidden-names   1" "$out"
if out=$(kubectl create configmap forbidden-x --from-literal=a=b 2>&1); then
  fail "the webhook let forbidden-x in: $out"
fi
expect_contains "kubectl create prints the webhook's denial" \
  'admission webhook "forbidden-names.envtest.example" denied the request: configmap forbidden-x: names starting with forbidden- are not allowed' "$out"
out=$(kubectl create configmap allowed-x --from-literal=a=b)
expect_contains "other names pass the match condition" "configmap/allowed-x created" "$out"

cat >"$WORK/policy.yaml" <<'YAML'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-passwords
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  validations:
  - expression: "!has(object.data) || !('password' in object.data)"
    message: "passwords belong in Secrets"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-passwords-binding
spec:
  policyName: no-passwords
  validationActions: [Deny]
YAML
out=$(kubectl apply -f "$WORK/policy.yaml")
expect_contains "apply an admission policy" "validatingadmissionpolicy.admissionregistration.k8s.io/no-passwords created" "$out"
expect_contains "apply its binding" "validatingadmissionpolicybinding.admissionregistration.k8s.io/no-passwords-binding created" "$out"
out=$(kubectl get validatingadmissionpolicies)
expect_contains "policies list their validation count" "VALIDATIONS" "$out"
out=$(kubectl get validatingadmissionpolicybindings)
expect_contains "bindings list their policy" "no-passwords" "$out"
if out=$(kubectl create configmap leaky --from-literal=password=hunter2 2>&1); then
  fail "the policy let leaky in: $out"
fi
expect_contains "kubectl create prints the policy's denial" \
  "ValidatingAdmissionPolicy 'no-passwords' with binding 'no-passwords-binding' denied request: passwords belong in Secrets" "$out"
out=$(kubectl explain validatingadmissionpolicy.spec.validations)
expect_contains "explain the policy's validations" "expression" "$out"

kubectl delete -f "$WORK/policy.yaml" >/dev/null
kubectl delete -f "$WORK/webhook.yaml" >/dev/null
kubectl delete configmap allowed-x >/dev/null
kill "$HOOK_PID" 2>/dev/null || true
wait "$HOOK_PID" 2>/dev/null || true
pass "admission objects removed"
