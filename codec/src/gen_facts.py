#!/usr/bin/env python3
"""Writes `facts/v1_NN.rs`: for every Go struct reachable from the kinds the
bridge carries, each field's Go facts as Kubernetes' own type definitions
(`types.go` of k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver)
state them: its JSON name, the shape of its Go type (a value, a pointer, a
slice or a map), the Go type, whether its JSON tag has `omitempty` (and
`omitzero`), whether it is embedded inline, and its protobuf field number,
joined by JSON name with the k8s-openapi field of the same struct (the Rust
field name, empty when k8s-openapi lacks the field).

The Go sources are read from git (the three staging repositories, each
tagged `kubernetes-1.NN.M`); k8s-openapi from the source folder cargo
unpacked (`cargo metadata` names it):

    python3 codec/src/gen_facts.py v1_35 kubernetes-1.35.0 API_GIT APIMACHINERY_GIT \\
        APIEXTENSIONS_GIT K8S_OPENAPI_SRC > codec/src/facts/v1_35.rs
    ... (one line per version: see docs/protobuf.md for the refs used)
    python3 codec/src/gen_facts.py --split codec/src/facts

The last step moves the structs every version shares into `common.rs`.
"""
import os
import re
import subprocess
import sys

# The Go packages the bridged types live in: import path -> (repo key, dir).
REPOS = {"k8s.io/api/": "api", "k8s.io/apimachinery/": "apimachinery",
         "k8s.io/apiextensions-apiserver/": "apiextensions"}

# Roots: the Go types of the kinds the bridge carries (gen_bridge.py's
# ROOTS) and the discovery documents bridge.rs writes by hand.
ROOTS = ["k8s.io/api/core/v1." + k for k in [
    "Namespace", "Pod", "ConfigMap", "Secret", "Service", "ServiceAccount", "Event", "Node",
    "Endpoints", "PersistentVolumeClaim", "ResourceQuota", "LimitRange"]] + [
    "k8s.io/api/apps/v1." + k for k in [
        "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"]] + [
    "k8s.io/api/batch/v1.Job", "k8s.io/api/batch/v1.CronJob", "k8s.io/api/events/v1.Event",
    "k8s.io/api/coordination/v1.Lease", "k8s.io/api/autoscaling/v1.Scale",
    "k8s.io/api/policy/v1.PodDisruptionBudget", "k8s.io/api/scheduling/v1.PriorityClass",
    "k8s.io/api/networking/v1.Ingress", "k8s.io/api/networking/v1.IngressClass",
    "k8s.io/api/networking/v1.NetworkPolicy"] + [
    "k8s.io/api/rbac/v1." + k for k in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]] + [
    "k8s.io/apimachinery/pkg/apis/meta/v1." + k for k in [
        "Status", "DeleteOptions", "ListMeta", "APIVersions", "APIGroupList", "APIGroup",
        "APIResourceList", "PartialObjectMetadata"]] + [
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.CustomResourceDefinition",
    "k8s.io/api/authorization/v1.SelfSubjectAccessReview",
    "k8s.io/api/authorization/v1.SelfSubjectRulesReview",
    "k8s.io/api/authentication/v1.SelfSubjectReview"]

# Go types whose JSON and protobuf forms are their own (hand-written
# marshallers), not their fields': the element kind the table names them by.
SPECIAL = {
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Duration": "Duration",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "FieldsV1",
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "Quantity",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "k8s.io/apimachinery/pkg/runtime.RawExtension": "RawExtension",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON": "Json",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrArray": "SchemaOrArray",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrBool": "SchemaOrBool",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrStringArray": "SchemaOrStringArray",
}
SCALARS = {"string": "String", "bool": "Bool", "byte": "Byte", "float64": "Float", "float32": "Float"}
SCALARS.update({t: "Int" for t in ["int", "int32", "int64", "uint", "uint32", "uint64", "int16", "uint16"]})


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


class Go:
    """The Go packages of one Kubernetes version, parsed on demand."""

    def __init__(self, ref, repos):
        self.ref, self.repos, self.pkgs = ref, repos, {}
        self.commits = {k: git(r, "rev-parse", ref + "^{commit}").strip() for k, r in repos.items()}

    def package(self, path):
        if path in self.pkgs:
            return self.pkgs[path]
        key = next(v for k, v in REPOS.items() if path.startswith(k))
        repo = self.repos[key]
        prefix = next(k for k in REPOS if path.startswith(k))
        folder = path[len(prefix):]
        names = git(repo, "ls-tree", "--name-only", f"{self.ref}:{folder}").split()
        structs, named = {}, {}
        for name in names:
            if (not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_")
                    or name.startswith("generated") or "swagger_doc" in name):
                continue
            text = git(repo, "show", f"{self.ref}:{folder}/{name}")
            imports = parse_imports(text)
            for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", text, re.S | re.M):
                structs[m.group(1)] = (parse_fields(m.group(2)), imports)
            for m in re.finditer(r"^type (\w+) struct\s*\{\}", text, re.M):
                structs[m.group(1)] = ([], imports)
            for m in re.finditer(r"^type (\w+) ([^\s{=][^\n]*?)\s*(//.*)?$", text, re.M):
                if not m.group(2).startswith(("struct", "interface", "func")):
                    named[m.group(1)] = (m.group(2).strip(), imports)
        self.pkgs[path] = (structs, named)
        return self.pkgs[path]

    def resolve(self, pkg, imports, name):
        """A base type name (`string`, `Foo`, `metav1.Time`) as (kind, key)."""
        if name in SCALARS:
            return SCALARS[name], None
        if "." in name:
            alias, n = name.split(".")
            pkg = imports[alias]
            name = n
        key = f"{pkg}.{name}"
        if key in SPECIAL:
            return SPECIAL[key], None
        structs, named = self.package(pkg)
        if name in structs:
            return "Struct", key
        if name in named:
            ty, imps = named[name]
            return self.resolve_expr(pkg, imps, ty)[1:]
        raise KeyError(key)

    def resolve_expr(self, pkg, imports, ty):
        """A field's Go type as (shape, element kind, struct key)."""
        if ty.startswith("*"):
            return ("Pointer",) + self.resolve_expr(pkg, imports, ty[1:])[1:]
        if ty == "[]byte":
            return ("Slice", "Byte", None)
        if ty.startswith("[]"):
            return ("Slice",) + self.resolve_expr(pkg, imports, ty[2:])[1:]
        if ty.startswith("map["):
            depth, i = 0, 3
            for i, c in enumerate(ty[3:], 3):
                depth += {"[": 1, "]": -1}.get(c, 0)
                if depth == 0:
                    break
            return ("Map",) + self.resolve_expr(pkg, imports, ty[i + 1:])[1:]
        kind, key = self.resolve(pkg, imports, ty)
        # A named type over a slice or map (`ResourceList`, `Verbs`) keeps
        # its shape; over a scalar it is that scalar.
        named = self.named_shape(pkg, imports, ty)
        return (named or "Value", kind, key)

    def named_shape(self, pkg, imports, ty):
        if ty in SCALARS:
            return None
        if "." in ty:
            alias, ty = ty.split(".")
            pkg = imports[alias]
        _, named = self.package(pkg)
        if ty not in named:
            return None
        under, imps = named[ty]
        if under == "[]byte":
            return "Slice"
        if under.startswith("[]"):
            return "Slice"
        if under.startswith("map["):
            return "Map"
        return self.named_shape(pkg, imps, under)


def parse_imports(text):
    out = {}
    block = re.search(r"^import \((.*?)^\)", text, re.S | re.M)
    lines = block.group(1).splitlines() if block else re.findall(r"^import (.*)$", text, re.M)
    for line in lines:
        m = re.match(r'\s*(\w+\s+)?"([^"]+)"', line)
        if m:
            alias = (m.group(1) or "").strip() or m.group(2).rsplit("/", 1)[-1]
            out[alias] = m.group(2)
    return out


def parse_fields(body):
    fields = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        m = re.match(r"(?:(\w+)\s+)?(\S+)\s+`([^`]*)`", line)
        if not m:
            continue
        tags = dict(re.findall(r'(\w+):"([^"]*)"', m.group(3)))
        if "json" not in tags:
            continue
        json = tags["json"].split(",")
        if json[0] == "-":
            continue
        proto = tags.get("protobuf", "").split(",")
        tag = int(proto[1]) if len(proto) > 1 and proto[1].isdigit() else 0
        name = m.group(1) or m.group(2).lstrip("*").split(".")[-1]
        fields.append({"go": name, "type": m.group(2), "json": json[0],
                       "omitempty": "omitempty" in json[1:], "omitzero": "omitzero" in json[1:],
                       # Go's encoding/json flattens an embedded struct
                       # without a JSON name (`json:",inline"` or `json:""`).
                       "inline": m.group(1) is None and json[0] == "", "tag": tag})
    return fields


def openapi_path(key):
    pkg, name = key.rsplit(".", 1)
    for prefix, mod in [("k8s.io/api/", "api::"), ("k8s.io/apimachinery/", "apimachinery::"),
                        ("k8s.io/apiextensions-apiserver/", "apiextensions_apiserver::")]:
        if pkg.startswith(prefix):
            return mod + pkg[len(prefix):].replace("/", "::"), name


def openapi_fields(src, key):
    """The k8s-openapi struct of a Go type: its path and JSON name -> Rust field."""
    mod, name = openapi_path(key)
    folder = os.path.join(src, *mod.split("::"))
    if not os.path.isdir(folder):
        return None, {}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".rs"):
            continue
        text = open(os.path.join(folder, f)).read()
        m = re.search(r"pub struct (\w+)", text)
        if m and m.group(1).lower() == name.lower():
            pairs = re.findall(r'"([^"]+)" => Field::Key_(\w+),', text)
            return f"{mod}::{m.group(1)}", dict(pairs)
    return None, {}


MISSING = []
ASSUME = [False]


def collect(go, src):
    seen, todo, out = set(), list(ROOTS), []

    def rows_of(key, json_to_rust, via):
        """A struct's fields, those of inline (embedded) structs flattened
        in, as JSON has them; `via` names the embedding Go field."""
        pkg, name = key.rsplit(".", 1)
        fields, imports = go.package(pkg)[0][name]
        rows = []
        for f in fields:
            shape, kind, sub = go.resolve_expr(pkg, imports, f["type"])
            if f["inline"] and sub:
                rows += rows_of(sub, json_to_rust, via or f["go"])
                continue
            if sub:
                todo.append(sub)
            rows.append(dict(f, shape=shape, kind=kind, sub=sub, via=via,
                             rust=json_to_rust.get(f["json"], "")))
        return rows

    while todo:
        key = todo.pop(0)
        if key in seen:
            continue
        seen.add(key)
        oa, json_to_rust = openapi_fields(src, key)
        rows = rows_of(key, json_to_rust, "")
        matched = {r["json"] for r in rows}
        missing = sorted(j for j in json_to_rust if j not in matched)
        if missing and not ASSUME[0]:
            sys.stderr.write(f"{key}: k8s-openapi fields the Go struct lacks: {missing}\n")
            MISSING.append(key)
        # With --assume-missing (a k8s-openapi generated from a newer commit
        # than the Go sources at hand): an optional field, as Kubernetes'
        # API conventions write one (a pointer with omitempty), marked `?`.
        rows += [dict(go="", json=j, rust=json_to_rust[j], shape="Pointer", kind="Unknown", sub=None,
                      via="", omitempty=True, omitzero=False, tag=0, type="?") for j in missing]
        out.append((key, oa or "", rows))
    return sorted(out, key=lambda u: short(u[0]))


def short(key):
    """`k8s.io/api/core/v1.Pod` -> `core/v1.Pod` (the table's struct keys)."""
    for prefix in ["k8s.io/api/", "k8s.io/"]:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


HEADER = "// @generated by gen_facts.py: do not edit by hand."


def emit(version, ref, go, structs):
    print(HEADER)
    print(f"// Kubernetes {version}: the Go sources at {ref} "
          f"(k8s.io/api {go.commits['api'][:12]}, k8s.io/apimachinery {go.commits['apimachinery'][:12]}, "
          f"k8s.io/apiextensions-apiserver {go.commits['apiextensions'][:12]}).")
    print("&[")
    for key, oa, rows in structs:
        print(unit(key, oa, rows))
    print("]")


def unit(key, oa, rows):
    lines = [f'go_struct!("{short(key)}", "{oa}", [']
    for r in rows:
        elem = f'Struct("{short(r["sub"])}")' if r["sub"] else r["kind"]
        flags = "".join(x for x, on in [("E", r["omitempty"]), ("Z", r["omitzero"])] if on) or "_"
        lines.append(f'    ("{r["go"]}", "{r["json"]}", "{r["rust"]}", {r["shape"]}, {elem}, '
                     f'{flags}, {r["tag"]}, "{r["type"]}", "{r["via"]}"),')
    lines.append("]),")
    return "\n".join(lines)


VERSIONS = ["v1_33", "v1_34", "v1_35", "v1_36", "v1_37"]


def units(text):
    out = []
    for block in re.split(r"\n(?=go_struct!|\]$)", text):
        block = block.strip()
        if block.startswith("go_struct!"):
            out.append(block)
    return out


def split(folder):
    tables, headers = {}, {}
    for v in VERSIONS:
        text = open(os.path.join(folder, f"{v}.rs")).read()
        headers[v] = [l for l in text.splitlines() if l.startswith("//")][:2]
        tables[v] = units(text)
    common = [u for u in tables[VERSIONS[-1]] if all(u in tables[v] for v in VERSIONS)]
    shared = set(common)
    with open(os.path.join(folder, "common.rs"), "w") as f:
        f.write("\n".join([HEADER, "// The structs every version's Go sources define alike.", "&["]
                          + common + ["]"]) + "\n")
    for v in VERSIONS:
        with open(os.path.join(folder, f"{v}.rs"), "w") as f:
            f.write("\n".join(headers[v] + ["&["] + [u for u in tables[v] if u not in shared] + ["]"])
                    + "\n")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--split":
        split(sys.argv[2])
        return
    args = sys.argv[1:]
    if args[0] == "--assume-missing":
        ASSUME[0] = True
        args = args[1:]
    version, ref, api, machinery, ext, src = args[:6]
    go = Go(ref, {"api": api, "apimachinery": machinery, "apiextensions": ext})
    emit(version, ref, go, collect(go, os.path.join(src, version)))
    if MISSING:
        sys.exit(1)


if __name__ == "__main__":
    main()
