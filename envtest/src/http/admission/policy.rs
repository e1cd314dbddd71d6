//! ValidatingAdmissionPolicy and its bindings, evaluated with CEL as
//! kube-apiserver does in the validating phase: a binding names a policy;
//! a request is checked when the policy's `matchConstraints` (resource
//! rules, exclusions, match policy, namespace and object selectors) and
//! the binding's `matchResources` match it and every `matchCondition`
//! holds; `variables` are bound under `variables`, params (`paramKind`,
//! found through the binding's `paramRef` by name or selector, with
//! `parameterNotFoundAction`) under `params`; each failed `validation`
//! (its `message`, or what `messageExpression` says, or `failed
//! expression: ...`) is acted on per the binding's `validationActions`:
//! `Deny` refuses the write with the validation's `reason`, `Warn` adds a
//! warning, `Audit` is accepted (there is no audit log). An expression
//! that cannot be evaluated refuses the write under `failurePolicy: Fail`.

use super::review::Attributes;
use super::rules;
use crate::error::ApiError;
use crate::http::state::Server;
use crate::resources::schema::expr::{Activation, Expression};
use serde_json::Value;

const POLICIES: &str = "admissionregistration.k8s.io/validatingadmissionpolicies";
const BINDINGS: &str = "admissionregistration.k8s.io/validatingadmissionpolicybindings";
const VARS: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
];

/// The policies and bindings configured when a write started.
#[derive(Debug, Default)]
pub struct Policies {
    /// (binding, its policy).
    pairs: Vec<(Value, Value)>,
}

impl Policies {
    /// Read the bindings and their policies from storage.
    pub fn load(srv: &Server) -> Policies {
        let (bindings, policies) = srv
            .store
            .txn(|t| (t.list(BINDINGS, None), t.list(POLICIES, None)));
        let pairs = bindings
            .iter()
            .filter_map(|(_, b)| {
                let name = b.value["spec"]["policyName"].as_str()?;
                let p = policies.iter().find(|(k, _)| k.1 == name)?;
                Some((b.value.clone(), p.1.value.clone()))
            })
            .collect();
        Policies { pairs }
    }

    /// Whether nothing is bound.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Check a write against every bound policy.
    pub fn validate(
        &self,
        srv: &Server,
        attrs: &Attributes,
        object: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        for (binding, policy) in &self.pairs {
            check(srv, binding, policy, attrs, object, warnings)?;
        }
        Ok(())
    }
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or("")
}

/// Do `matchConstraints` / `matchResources` match the request? A
/// binding's `matchResources` without `resourceRules` matches every
/// resource (`any_resource`); a policy's needs them.
fn constraints_match(
    srv: &Server,
    m: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
    any_resource: bool,
) -> bool {
    let scope = rules::Scope {
        group: &attrs.resource_group,
        version: &attrs.version,
        resource: &attrs.resource,
        sub: &attrs.sub,
        operation: attrs.operation,
        namespaced: attrs.namespaced,
    };
    let equivalent = m["matchPolicy"].as_str() != Some("Exact");
    let named = |r: &Value| {
        let names = r["resourceNames"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        names.is_empty()
            || names
                .iter()
                .any(|n| n.as_str() == Some(attrs.name.as_str()))
    };
    let hit = |list: &Value| {
        list.as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .any(|r| {
                named(r)
                    && (rules::rule_matches(r, &scope, false)
                        || (equivalent && rules::rule_matches(r, &scope, true)))
            })
    };
    let unruled = m["resourceRules"].as_array().is_none_or(Vec::is_empty);
    if !(hit(&m["resourceRules"]) || (any_resource && unruled)) || hit(&m["excludeResourceRules"]) {
        return false;
    }
    if let Some(labels) = super::namespace_labels(srv, attrs, object)
        && !rules::selector_matches(&m["namespaceSelector"], labels.as_object().map(|_| &labels))
    {
        return false;
    }
    rules::object_selector_matches(&m["objectSelector"], object, attrs.old_object.as_ref())
}

/// The HTTP code of a validation `reason`.
fn code_of(reason: &str) -> u16 {
    match reason {
        "Unauthorized" => 401,
        "Forbidden" => 403,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// The param objects a binding selects (`None`: the policy takes none).
fn params(srv: &Server, policy: &Value, binding: &Value, attrs: &Attributes) -> Option<Vec<Value>> {
    let kind = &policy["spec"]["paramKind"];
    if !kind.is_object() {
        return None;
    }
    let av = kind["apiVersion"].as_str().unwrap_or("");
    let (group, version) = av.split_once('/').unwrap_or(("", av));
    let info = srv
        .registry
        .group_version(group, version)
        .into_iter()
        .find(|r| kind["kind"].as_str() == Some(r.kind.as_str()))?;
    let r = &binding["spec"]["paramRef"];
    let ns = match r["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => Some(n.to_string()),
        None if info.namespaced => Some(attrs.namespace.clone()),
        None => None,
    };
    let all = srv
        .store
        .txn(|t| t.list(&info.storage_key(), ns.as_deref()));
    let found = all
        .into_iter()
        .map(|(_, o)| o.value.clone())
        .filter(|o| match r["name"].as_str().filter(|n| !n.is_empty()) {
            Some(n) => name(o) == n,
            None => rules::selector_matches(&r["selector"], o["metadata"].get("labels")),
        })
        .collect();
    Some(found)
}

fn check(
    srv: &Server,
    binding: &Value,
    policy: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let spec = &policy["spec"];
    if !constraints_match(srv, &spec["matchConstraints"], attrs, object, false) {
        return Ok(());
    }
    let br = &binding["spec"]["matchResources"];
    if br.is_object() && !constraints_match(srv, br, attrs, object, true) {
        return Ok(());
    }
    let (pname, bname) = (name(policy), name(binding));
    let actions: Vec<&str> = binding["spec"]["validationActions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fail_closed = spec["failurePolicy"].as_str() != Some("Ignore");
    let denied = |reason: &str, msg: &str| {
        ApiError::new(
            code_of(reason),
            reason,
            format!(
                "ValidatingAdmissionPolicy '{pname}' with binding '{bname}' denied request: {msg}"
            ),
        )
    };
    let param_sets = match params(srv, policy, binding, attrs) {
        None => vec![Value::Null],
        Some(found) if found.is_empty() => {
            if binding["spec"]["paramRef"]["parameterNotFoundAction"].as_str() == Some("Allow") {
                return Ok(());
            }
            return Err(denied(
                "Invalid",
                "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
            ));
        }
        Some(found) => found,
    };
    let namespace_object = if attrs.namespaced {
        let key = (String::new(), attrs.namespace.clone());
        srv.store
            .txn(|t| t.get("/namespaces", &key))
            .map_or(Value::Null, |n| n.value.clone())
    } else {
        Value::Null
    };
    let request = attrs.request("");
    for param in param_sets {
        let mut act = Activation::new()
            .json("object", object.unwrap_or(&Value::Null))
            .json(
                "oldObject",
                attrs.old_object.as_ref().unwrap_or(&Value::Null),
            )
            .json("request", &request)
            .json("params", &param)
            .json("namespaceObject", &namespace_object);
        match evaluate(spec, &mut act) {
            Ok(None) => {}
            Ok(Some((reason, msg))) => {
                if actions.contains(&"Warn") {
                    warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{pname}' with binding '{bname}': {msg}"
                    ));
                }
                if actions.contains(&"Deny") {
                    return Err(denied(&reason, &msg));
                }
            }
            Err(why) if fail_closed && actions.contains(&"Deny") => {
                return Err(denied("Invalid", &why));
            }
            Err(why) => {
                if actions.contains(&"Warn") {
                    warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{pname}' with binding '{bname}': {why}"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn compile(src: &str) -> Result<Expression, String> {
    Expression::compile(src, VARS).map_err(|e| format!("expression '{src}' resulted in error: {e}"))
}

/// Run a policy's match conditions, variables and validations: the first
/// failed validation's (reason, message), or `None`; `Err` when an
/// expression cannot be evaluated.
fn evaluate(spec: &Value, act: &mut Activation) -> Result<Option<(String, String)>, String> {
    let list = |k: &str| spec[k].as_array().cloned().unwrap_or_default();
    for c in list("matchConditions") {
        let src = c["expression"].as_str().unwrap_or("");
        let holds = compile(src)?
            .eval_bool(act)
            .map_err(|e| format!("expression '{src}' resulted in error: {e}"))?;
        if !holds {
            return Ok(None);
        }
    }
    for v in list("variables") {
        let src = v["expression"].as_str().unwrap_or("");
        // A variable that cannot be evaluated fails the expressions using it.
        if let Ok(val) = compile(src)?.eval(act) {
            act.set_variable(v["name"].as_str().unwrap_or(""), val);
        }
    }
    for v in list("validations") {
        let src = v["expression"].as_str().unwrap_or("");
        let ok = compile(src)?
            .eval_bool(act)
            .map_err(|e| format!("expression '{src}' resulted in error: {e}"))?;
        if ok {
            continue;
        }
        let from_expr = v["messageExpression"]
            .as_str()
            .and_then(|m| compile(m).ok()?.eval_string(act).ok())
            .filter(|m| !m.trim().is_empty());
        let msg = from_expr
            .or_else(|| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("failed expression: {src}"));
        let reason = v["reason"].as_str().unwrap_or("Invalid").to_string();
        return Ok(Some((reason, msg)));
    }
    Ok(None)
}
