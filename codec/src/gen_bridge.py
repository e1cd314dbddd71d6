#!/usr/bin/env python3
"""Writes a `bridge_tables/v1_NN.rs` (one per k8s-openapi version): one `bridge!` line per protobuf message reachable
from the built-in kinds envtest serves, naming each field present in both the
k8s-pb struct and the k8s-openapi struct of the same path, with how the two
field types nest (`opt`, `req`, `optvec`, `vec`, `optmap`, `map`), and for single
values what their Go facts (`facts/`, written by gen_facts.py: run it first)
make of a Go zero value (`zopt`, `kopt`, `popt`: see bridge.rs).

The compiler checks every line (a wrong name or nesting does not build), so
this script only saves typing. Run it after bumping k8s-pb or k8s-openapi:

    for v in 33 34 35 36 37; do
      python3 codec/src/gen_bridge.py K8S_PB_SRC K8S_OPENAPI_SRC/v1_$v \
        codec/src/facts > codec/src/bridge_tables/v1_$v.rs
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


def mode(pb_ty, oa_ty, fact):
    """How a field nests, and for a single value, what its Go facts
    (`fact`: shape, element, omitempty, omitzero) make of a zero."""
    if pb_ty.startswith("Option<"):
        if oa_ty.startswith("Option<"):
            if fact is None:
                return "opt"
            shape, elem, omitempty, omitzero = fact
            absent = zero_reads_absent(shape, elem, omitempty, omitzero)
            if shape == "Value":
                # Always written by Go's marshaller: its zero reads absent
                # when Go's JSON leaves it out, is kept otherwise.
                return "zopt" if absent else "kopt"
            # A pointer (or a `[]byte`): written when set; a zero it points
            # to reads absent when JSON has no form for it (a zero time).
            return "popt" if absent and elem in ("Time", "MicroTime", "Byte") else "opt"
        # A required time has no default value to fall back on.
        return "reqtime" if oa_ty.endswith(("::Time", "::MicroTime")) else "req"
    if pb_ty.startswith("Vec<"):
        return "optvec" if oa_ty.startswith("Option<") else "vec"
    if pb_ty.startswith("BTreeMap<"):
        return "optmap" if oa_ty.startswith("Option<") else "map"
    raise ValueError(pb_ty)


def zero_reads_absent(shape, elem, omitempty, omitzero):
    """Whether Go's JSON leaves a field out (or writes `null`) when it holds
    its Go zero value (the same rule as `facts::GoField::zero_reads_absent`)."""
    if shape == "Value":
        if elem in ("Time", "MicroTime", "RawExtension"):
            return True
        if elem in ("String", "Int", "Bool", "Float"):
            return omitempty or omitzero
        return omitzero
    return omitempty or omitzero


def read_facts(folder, version):
    """The Go facts tables (`facts/common.rs` and `facts/v1_NN.rs`): k8s-openapi
    path -> Rust field -> (shape, element, omitempty, omitzero)."""
    out = {}
    row = re.compile(r'\("[^"]*", "[^"]*", "(\w*)", (\w+), (\w+)(?:\("[^"]*"\))?, (\w+),')
    for name in ["common.rs", f"{version}.rs"]:
        text = open(os.path.join(folder, name)).read()
        for m in re.finditer(r'go_struct!\("[^"]+", "([^"]*)", \[\n(.*?)^\]\)', text, re.S | re.M):
            fields = out.setdefault(m.group(1), {})
            for r in row.finditer(m.group(2)):
                flags = r.group(4)
                fields[r.group(1)] = (r.group(2), r.group(3), "E" in flags, "Z" in flags)
    return out


def norm(name):
    return name.replace("_", "").lower()


def refs(ty):
    return re.findall(r"((?:api|apimachinery|apiextensions_apiserver)::[\w:]+)", ty)


def main():
    pb = pb_structs(sys.argv[1])
    oa = oa_structs(sys.argv[2])
    facts = read_facts(sys.argv[3], os.path.basename(sys.argv[2].rstrip("/")))
    oa_by_norm = {k.lower(): k for k in oa}
    seen, todo, lines = set(), list(ROOTS), []
    # For the JSON-only kinds: what each message reaches, and its fields
    # only JSON has.
    edges, json_only = {}, {}

    def fields_of(pb_path, oaf, notes, oa_facts):
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
                    sub, _ = fields_of(inner[0], oaf, notes, oa_facts)
                    embeds.append((f"{raw}{name}", inner[0], sub))
                    continue
                notes.append(f"{name} (protobuf only)")
                continue
            todo.extend(refs(ty))
            edges.setdefault(pb_path, set()).update(refs(ty))
            fact = oa_facts.get(oname.removeprefix("r#")) if oa_facts else None
            direct.append((f"{raw}{name}", oname, mode(ty, oaf.pop(oname), fact)))
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
        oa_facts = facts.get(oa_path)
        if oa_facts is None:
            raise KeyError(f"{oa_path}: no Go facts (run gen_facts.py first)")
        direct, embeds = fields_of(path, oaf, notes, oa_facts)
        for e in embeds:
            edges.setdefault(path, set()).add(e[1])
        notes += [f"{k} (JSON only)" for k in oaf]
        # A request's own `apiVersion`/`kind` (DeleteOptions) are its type,
        # named by the envelope, not data.
        json_only[path] = [f"{oa_path.rsplit('::', 1)[1]}.{k}" for k in oaf
                           if k not in ("api_version", "kind")]
        if notes:
            lines.append(f"// {path}: " + ", ".join(notes))
        emb = ", ".join(f"({f}, {p}, [{fmt(d)}])" for f, p, d in embeds)
        rest = " Default" if oaf else ""
        lines.append(f"bridge!({oa_path} => {path} [{fmt(direct)}] [{emb}]{rest});")
    print(HEADER)
    print("\n".join(lines))
    # The kinds whose messages reach a field only JSON has: read in JSON.
    kinds = []
    # A list's metadata is not an object a client keeps (an informer reads
    # its resourceVersion and continue token), and a Status carries none
    # to read: ListMeta's JSON-only fields make no kind JSON-only.
    for root in [r for r in ROOTS if not r.endswith(("::ListMeta", "::Status"))]:
        reach, stack, lost = set(), ["::".join(root.split("::"))], []
        while stack:
            p = stack.pop()
            if p in reach:
                continue
            reach.add(p)
            lost += json_only.get(p, [])
            if p.endswith("::ListMeta"):
                continue
            stack += sorted(edges.get(p, ()))
        if lost:
            names = ", ".join(f'"{n}"' for n in sorted(set(lost)))
            kinds.append(f'("{root}", &[{names}])')
    print("// The kinds whose messages reach fields only JSON has (read in JSON):")
    print(f"json_only!([{', '.join(kinds)}]);")


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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--split":
        split(sys.argv[2])
    else:
        main()
