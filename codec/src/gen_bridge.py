#!/usr/bin/env python3
"""Writes a `bridge_tables/v1_NN.rs` (one per k8s-openapi version): one `bridge!` line per protobuf message reachable
from the built-in kinds envtest serves, naming each field present in both the
k8s-pb struct and the k8s-openapi struct of the same path, with how the two
field types nest (`opt`, `req`, `optvec`, `vec`, `optmap`, `map`).

The compiler checks every line (a wrong name or nesting does not build), so
this script only saves typing. Run it after bumping k8s-pb or k8s-openapi:

    for v in 33 34 35 36 37; do
      python3 codec/src/gen_bridge.py K8S_PB_SRC K8S_OPENAPI_SRC/v1_$v \
        > codec/src/bridge_tables/v1_$v.rs
    done
    python3 codec/src/gen_bridge.py --split codec/src/bridge_tables

The last step moves the lines every version shares into `common.rs`, so
each version's file holds only what differs.

(the two source folders of the crates as cargo unpacked them, `cargo metadata`
names them). Fields only one side has are listed as comments in the output.
"""
import os
import re
import sys

ROOTS = [
    "api::core::v1::" + k for k in [
        "Namespace", "Pod", "ConfigMap", "Secret", "Service", "ServiceAccount", "Event", "Node",
        "Endpoints", "PersistentVolumeClaim", "ResourceQuota", "LimitRange"]
] + ["api::apps::v1::" + k for k in [
        "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"]
] + ["api::batch::v1::Job", "api::batch::v1::CronJob", "api::events::v1::Event",
     "api::coordination::v1::Lease", "api::autoscaling::v1::Scale",
     "api::policy::v1::PodDisruptionBudget", "api::scheduling::v1::PriorityClass",
     "api::networking::v1::Ingress", "api::networking::v1::IngressClass",
     "api::networking::v1::NetworkPolicy"
] + ["api::rbac::v1::" + k for k in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]
] + ["apimachinery::pkg::apis::meta::v1::" + k for k in [
        "Status", "DeleteOptions", "ListMeta"]] + [
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::" + k for k in [
        "CustomResourceDefinition", "ExternalDocumentation", "ValidationRule"]
] + ["api::authorization::v1::SelfSubjectAccessReview", "api::authorization::v1::SelfSubjectRulesReview",
     "api::authentication::v1::SelfSubjectReview"]

# Hand-written in bridge.rs (their JSON form is not their message's fields).
LEAVES = {
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::apis::meta::v1::Duration",
    "apimachinery::pkg::util::intstr::IntOrString",
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::runtime::RawExtension",
    # A CRD's schema (written by hand in bridge.rs): `$ref` is `ref` in
    # protobuf but `ref_path` in k8s-openapi, each "or" type is one JSON value
    # of either shape, JSON is raw bytes in protobuf, and the status
    # subresource is an empty object.
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::Json",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceStatus",
}

def pb_structs(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        if "mod.rs" not in files:
            continue
        mod = os.path.relpath(dirpath, root).split(os.sep)
        text = open(os.path.join(dirpath, "mod.rs")).read()
        for m in re.finditer(r"pub struct (\w+) \{\n(.*?)\n\}", text, re.S):
            fields, cur = [], None
            for line in m.group(2).split("\n"):
                line = line.strip()
                if line.startswith("pub "):
                    cur = line
                elif cur is not None and not line.startswith(("///", "#[")):
                    cur += line
                else:
                    continue
                if cur.endswith(","):
                    f = re.match(r"pub (r#)?(\w+):\s*(.*?),$", cur)
                    fields.append((f.group(1) or "", f.group(2), resolve(mod, f.group(3))))
                    cur = None
            out["::".join(mod + [m.group(1)])] = fields
    return out


def resolve(mod, ty):
    """Rewrite `super::super::X` paths in a pb type to absolute ones."""
    def one(m):
        ups = m.group(0).count("super::")
        base = mod[: len(mod) - ups]
        return "::".join(base) + "::"
    ty = re.sub(r"(super::)+", one, ty)
    ty = ty.replace("::core::option::Option", "Option").replace("::prost::alloc::vec::Vec", "Vec")
    ty = ty.replace("::prost::alloc::string::String", "String")
    ty = ty.replace("::prost::alloc::collections::BTreeMap", "BTreeMap")
    known = {"Option", "Vec", "String", "BTreeMap"}
    return re.sub(r"(?<![:\w])([A-Z]\w*)",
                  lambda m: m.group(1) if m.group(1) in known else "::".join(mod + [m.group(1)]), ty)


def oa_structs(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        mod = os.path.relpath(dirpath, root).split(os.sep)
        for f in files:
            if not f.endswith(".rs") or f == "mod.rs":
                continue
            text = open(os.path.join(dirpath, f)).read()
            m = re.search(r"pub struct (\w+) \{\n(.*?)\n\}", text, re.S)
            if not m:
                continue
            fields = {}
            for line in m.group(2).split("\n"):
                fm = re.match(r"\s*pub (\w+): (.*),$", line)
                if fm:
                    fields[fm.group(1)] = fm.group(2)
            out["::".join(mod + [m.group(1)])] = fields
    return out


def mode(pb_ty, oa_ty):
    if pb_ty.startswith("Option<"):
        if oa_ty.startswith("Option<"):
            return "opt"
        # A required time has no default value to fall back on.
        return "reqtime" if oa_ty.endswith(("::Time", "::MicroTime")) else "req"
    if pb_ty.startswith("Vec<"):
        return "optvec" if oa_ty.startswith("Option<") else "vec"
    if pb_ty.startswith("BTreeMap<"):
        return "optmap" if oa_ty.startswith("Option<") else "map"
    raise ValueError(pb_ty)


def norm(name):
    return name.replace("_", "").lower()


def refs(ty):
    return re.findall(r"((?:api|apimachinery|apiextensions_apiserver)::[\w:]+)", ty)


def main():
    pb = pb_structs(sys.argv[1])
    oa = oa_structs(sys.argv[2])
    oa_by_norm = {k.lower(): k for k in oa}
    seen, todo, lines = set(), list(ROOTS), []

    def fields_of(pb_path, oaf, notes):
        """Pairs (pb field, openapi field, mode) and embedded messages."""
        direct, embeds = [], []
        by_norm = {norm(k): k for k in oaf}
        for raw, name, ty in pb[pb_path]:
            oname = by_norm.get(norm(name))
            if oname is None:
                inner = refs(ty)
                # An embedded Go struct: most of its fields sit in the JSON type
                # (a few may belong to another Kubernetes version).
                fields = pb.get(inner[0], []) if inner else []
                found = sum(norm(n) in by_norm for _, n, _ in fields)
                if inner and inner[0] not in LEAVES and fields and 2 * found >= len(fields):
                    sub, _ = fields_of(inner[0], oaf, notes)
                    embeds.append((f"{raw}{name}", inner[0], sub))
                    continue
                notes.append(f"{name} (protobuf only)")
                continue
            todo.extend(refs(ty))
            direct.append((f"{raw}{name}", oname, mode(ty, oaf.pop(oname))))
        return direct, embeds

    def fmt(direct):
        return ", ".join(f"({p}, {o}, {m})" for p, o, m in direct)

    while todo:
        path = todo.pop(0)
        if path in seen or path in LEAVES:
            continue
        seen.add(path)
        oa_path = oa_by_norm.get(path.lower())
        if path not in pb or oa_path is None:
            lines.append(f"// {path}: no k8s-openapi struct of this name")
            continue
        oaf = dict(oa[oa_path])
        notes = []
        direct, embeds = fields_of(path, oaf, notes)
        notes += [f"{k} (JSON only)" for k in oaf]
        if notes:
            lines.append(f"// {path}: " + ", ".join(notes))
        emb = ", ".join(f"({f}, {p}, [{fmt(d)}])" for f, p, d in embeds)
        rest = " Default" if oaf else ""
        lines.append(f"bridge!({oa_path} => {path} [{fmt(direct)}] [{emb}]{rest});")
    print(HEADER)
    print("\n".join(lines))


HEADER = "// @generated by gen_bridge.py: do not edit by hand."
VERSIONS = ["v1_33", "v1_34", "v1_35", "v1_36", "v1_37"]


def units(text):
    """The `bridge!` lines of a table, each with the comment lines before it."""
    out, pending = [], []
    for line in text.splitlines():
        if line == HEADER or not line.strip():
            continue
        pending.append(line)
        if not line.startswith("//"):
            out.append("\n".join(pending))
            pending = []
    if pending:
        out.append("\n".join(pending))
    return out


def split(folder):
    """Move the units every version's table has into `common.rs`."""
    tables = {}
    for v in VERSIONS:
        with open(os.path.join(folder, f"{v}.rs")) as f:
            tables[v] = units(f.read())
    common = [u for u in tables[VERSIONS[-1]] if all(u in tables[v] for v in VERSIONS)]
    shared = set(common)
    with open(os.path.join(folder, "common.rs"), "w") as f:
        f.write("\n".join([HEADER] + common) + "\n")
    for v in VERSIONS:
        with open(os.path.join(folder, f"{v}.rs"), "w") as f:
            f.write("\n".join([HEADER] + [u for u in tables[v] if u not in shared]) + "\n")


if len(sys.argv) == 3 and sys.argv[1] == "--split":
    split(sys.argv[2])
else:
    main()
