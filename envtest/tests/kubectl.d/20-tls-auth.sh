# HTTPS and bearer tokens, as kubectl (client-go) needs them: client-go sends
# a token only over TLS. Starts its own `--tls --token` server on port 0,
# then asks who it is and what it may do (auth whoami / can-i / can-i --list).
TLS_DIR="$WORK/tls"
mkdir -p "$TLS_DIR"
TLS_KC="$TLS_DIR/kubeconfig"
"$SERVER_BIN" --port 0 --tls --token s3cret --kubeconfig "$TLS_KC" >"$TLS_DIR/server.log" 2>&1 &
TLS_PID=$!
# Stop this server too if a check fails (fail exits the whole script).
trap 'kill -INT "$TLS_PID" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 100); do
  [ -s "$TLS_KC" ] && break
  kill -0 "$TLS_PID" 2>/dev/null || { cat "$TLS_DIR/server.log" >&2; fail "TLS server exited early"; }
  sleep 0.1
done
[ -s "$TLS_KC" ] || fail "TLS server did not write a kubeconfig"
expect_contains "TLS server listens on https" "listening on https://127.0.0.1:" "$(cat "$TLS_DIR/server.log")"
expect_contains "kubeconfig carries the CA" "certificate-authority-data: " "$(cat "$TLS_KC")"
expect_contains "kubeconfig carries the token" 'token: "s3cret"' "$(cat "$TLS_KC")"

out=$(kubectl --kubeconfig "$TLS_KC" get namespaces)
expect_contains "get namespaces over TLS with the token" "kube-system" "$out"
if kubectl --kubeconfig "$TLS_KC" --token wrong get namespaces >"$TLS_DIR/wrong.out" 2>&1; then
  fail "a wrong token was accepted"
fi
expect_contains "a wrong token is refused" "Unauthorized" "$(cat "$TLS_DIR/wrong.out")"
sed '/certificate-authority-data/d' "$TLS_KC" >"$TLS_DIR/no-ca"
if kubectl --kubeconfig "$TLS_DIR/no-ca" get namespaces >"$TLS_DIR/no-ca.out" 2>&1; then
  fail "a client without the generated CA connected"
fi
expect_contains "a client without the generated CA does not trust the server" "certificate" "$(cat "$TLS_DIR/no-ca.out")"

out=$(kubectl --kubeconfig "$TLS_KC" auth can-i create configmaps)
[ "$out" = "yes" ] || fail "auth can-i create configmaps gave [$out]"
pass "auth can-i create configmaps"
out=$(kubectl --kubeconfig "$TLS_KC" auth can-i delete secrets -n kube-system)
[ "$out" = "yes" ] || fail "auth can-i delete secrets gave [$out]"
pass "auth can-i in another namespace"
out=$(kubectl --kubeconfig "$TLS_KC" auth can-i --list)
expect_contains "auth can-i --list shows the admin's rule" "*.*" "$out"
out=$(kubectl --kubeconfig "$TLS_KC" auth whoami)
expect_contains "auth whoami names the user" "envtest-admin" "$out"
expect_contains "auth whoami lists the groups" "system:masters" "$out"

kill -INT "$TLS_PID" 2>/dev/null || true
wait "$TLS_PID" 2>/dev/null || true
trap cleanup EXIT
