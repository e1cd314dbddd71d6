# The official Python client (`kubernetes` on PyPI, installed with pip when
# missing) lists ConfigMaps as PartialObjectMetadataList, as its users do to
# read only metadata: the answer's kind and apiVersion, each item's metadata
# and no data, and the list's resourceVersion.
command -v python3 >/dev/null || fail "python3 not found on PATH"
if ! python3 -c 'import kubernetes' 2>/dev/null; then
  python3 -m pip install --quiet kubernetes >"$WORK/pip.log" 2>&1 \
    || { cat "$WORK/pip.log" >&2; fail "pip could not install the kubernetes client"; }
fi
cat >"$WORK/metadata_list.py" <<'PY'
import json
from kubernetes import client, config

config.load_kube_config()
api = client.ApiClient()
core = client.CoreV1Api(api)
for i in range(3):
    core.create_namespaced_config_map("default", {
        "metadata": {"name": f"py-meta-{i}", "labels": {"via": "python"}},
        "data": {"payload": "x" * 1000},
    })
# The generated call, its Accept header replaced by a metadata-only one.
resp = core.list_namespaced_config_map(
    "default", label_selector="via=python", _preload_content=False,
    _headers={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
)
body = json.loads(resp.data)
print("kind", body["kind"], body["apiVersion"])
print("rv", "resourceVersion" in body["metadata"])
for item in body["items"]:
    print("item", item["kind"], item["metadata"]["name"], item["metadata"]["labels"]["via"])
print("items with data:", sum(1 for item in body["items"] if "data" in item))
for i in range(3):
    core.delete_namespaced_config_map(f"py-meta-{i}", "default")
PY
out=$(python3 "$WORK/metadata_list.py" 2>&1) || fail "python metadata list failed: $out"
expect_contains "python: the list is a PartialObjectMetadataList" "kind PartialObjectMetadataList meta.k8s.io/v1" "$out"
expect_contains "python: the list carries its resourceVersion" "rv True" "$out"
expect_contains "python: items are PartialObjectMetadata" "item PartialObjectMetadata py-meta-0 python" "$out"
expect_contains "python: every item listed" "item PartialObjectMetadata py-meta-2 python" "$out"
expect_contains "python: no item carries data" "items with data: 0" "$out"
