//! `x-kubernetes-validations`: CEL rules declared on a CRD's schema nodes,
//! compiled when the CRD is written (a malformed rule, or one calling what
//! envtest cannot evaluate, is a 422 naming the rule's path) and evaluated on
//! every create, update, patch and apply of its objects, as the API server
//! does.
//!
//! A rule sees `self`, the value at the schema node that declares it (an
//! object, a list or a scalar). A transition rule also refers to `oldSelf`,
//! the correlated old value: it runs only on update when that old value
//! exists, unless `optionalOldSelf: true`, where `oldSelf` is an optional
//! (`optional.none()` on create). Old values are correlated through object
//! properties, map keys and `x-kubernetes-list-type: map`/`set` items, never
//! inside atomic lists (a transition rule there is refused at CRD write).
//! A value unchanged since the old object is not re-checked (the API
//! server's validation ratcheting). A failed rule becomes a cause with
//! `reason` (FieldValueInvalid by default, or Forbidden, Required,
//! Duplicate), at the node's path plus `fieldPath`, with `message`, or what
//! `messageExpression` evaluates to, or `failed rule: <rule>`.
//!
//! Compiled rules are cached per CRD version schema ([`rules_for`]), so
//! nothing is parsed per request.

use super::cel_library::{ENV, Refs};
use crate::error::Cause;
use cel::objects::OptionalValue;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

/// The cause type of a failed rule, from its `reason`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

struct Rule {
    source: String,
    program: cel::Program,
    message: Option<String>,
    message_expr: Option<cel::Program>,
    reason: Reason,
    field_path: Option<String>,
    transition: bool,
    optional_old_self: bool,
    cost: f64,
}

/// How old list items are found for new ones.
#[derive(Default)]
enum ListType {
    #[default]
    Atomic,
    Set,
    Map(Vec<String>),
}

/// The compiled rules of one schema node and of the nodes below it; only
/// subtrees that declare rules are kept.
#[derive(Default)]
pub struct Node {
    type_name: String,
    rules: Vec<Rule>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    list_type: ListType,
    /// Estimated cost of this node's rules and, times the number of times
    /// they can run, of the rules below ([`super::cel_cost`]).
    cost: f64,
}

impl Node {
    /// Estimated worst-case cost of every rule in this subtree.
    pub fn cost(&self) -> f64 {
        self.cost
    }

    fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.properties.is_empty()
            && self.additional.is_none()
            && self.items.is_none()
    }
}

fn cause(causes: &mut Vec<Cause>, reason: &str, field: String, message: String) {
    causes.push(Cause {
        reason: reason.into(),
        message,
        field,
    });
}

/// Compile one program, or say (as a cause at `field`) why it is refused.
fn program(src: &str, field: String, causes: &mut Vec<Cause>) -> Option<(cel::Program, Refs)> {
    let refused = match ENV.compile(src) {
        Ok(p) => {
            let refs = Refs::of(p.expression());
            match refs.unsupported() {
                None => return Some((p, refs)),
                Some(why) => why,
            }
        }
        Err(e) => e.to_string().replace('\n', " "),
    };
    cause(
        causes,
        "FieldValueInvalid",
        field,
        format!("Invalid value: {src:?}: compilation failed: {refused}"),
    );
    None
}

/// Refuse a program that selects a field its schema rules out, or whose
/// estimated cost is over the per-rule limit; answers the estimate.
fn priced(
    p: &cel::Program,
    src: &str,
    schema: &Value,
    what: &str,
    field: String,
    causes: &mut Vec<Cause>,
) -> f64 {
    let (cost, problems) = super::cel_cost::analyze(p.expression(), schema);
    if let Some(problem) = problems.first() {
        cause(
            causes,
            "FieldValueInvalid",
            field,
            format!("Invalid value: {src:?}: compilation failed: ERROR: <input>: {problem}"),
        );
        return cost;
    }
    if cost > super::cel_cost::RULE_LIMIT {
        cause(
            causes,
            "FieldValueForbidden",
            field,
            super::cel_cost::over_budget(
                &format!("estimated {what} cost"),
                cost,
                super::cel_cost::RULE_LIMIT,
            ),
        );
    }
    cost
}

fn compile_rule(
    raw: &Value,
    schema: &Value,
    at: &str,
    correlatable: bool,
    causes: &mut Vec<Cause>,
) -> Option<Rule> {
    let before = causes.len();
    let src = raw["rule"].as_str().unwrap_or("").trim().to_string();
    if src.is_empty() {
        cause(
            causes,
            "FieldValueRequired",
            format!("{at}.rule"),
            "Required value: rule is not specified".into(),
        );
        return None;
    }
    let compiled = program(&src, format!("{at}.rule"), causes);
    let mut cost = compiled.as_ref().map_or(0.0, |(p, _)| {
        priced(p, &src, schema, "rule", format!("{at}.rule"), causes)
    });
    let transition = compiled
        .as_ref()
        .is_some_and(|(_, r)| r.variables.contains("oldSelf"));
    let message_expr = raw["messageExpression"]
        .as_str()
        .filter(|m| !m.trim().is_empty())
        .and_then(|m| program(m, format!("{at}.messageExpression"), causes))
        .map(|(p, _)| {
            cost += priced(
                &p,
                raw["messageExpression"].as_str().unwrap_or(""),
                schema,
                "messageExpression",
                format!("{at}.messageExpression"),
                causes,
            );
            p
        });
    let reason = match raw["reason"].as_str().unwrap_or("FieldValueInvalid") {
        "FieldValueInvalid" => Reason::Invalid,
        "FieldValueForbidden" => Reason::Forbidden,
        "FieldValueRequired" => Reason::Required,
        "FieldValueDuplicate" => Reason::Duplicate,
        other => {
            cause(
                causes,
                "FieldValueNotSupported",
                format!("{at}.reason"),
                format!(
                    "Unsupported value: {other:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
                ),
            );
            Reason::Invalid
        }
    };
    let field_path = raw["fieldPath"]
        .as_str()
        .filter(|f| !f.is_empty())
        .map(str::to_string);
    if let Some(f) = &field_path
        && !(f.starts_with('.') || f.starts_with('['))
    {
        cause(
            causes,
            "FieldValueInvalid",
            format!("{at}.fieldPath"),
            format!("Invalid value: {f:?}: must be a relative field path starting with '.' or '['"),
        );
    }
    let optional_old_self = raw["optionalOldSelf"] == true;
    if optional_old_self && compiled.is_some() && !transition {
        cause(
            causes,
            "FieldValueForbidden",
            format!("{at}.optionalOldSelf"),
            "Forbidden: may not be set if oldSelf is not referenced in rule".into(),
        );
    }
    if transition && !correlatable {
        cause(causes, "FieldValueForbidden", format!("{at}.rule"),
            "Forbidden: oldSelf cannot be used on the uncorrelatable portion of the schema within atomic lists".into());
    }
    if let Some(m) = raw["message"].as_str()
        && m.contains('\n')
    {
        cause(
            causes,
            "FieldValueInvalid",
            format!("{at}.message"),
            format!("Invalid value: {m:?}: message must not contain line breaks"),
        );
    }
    let (program, _) = compiled?;
    (causes.len() == before).then(|| Rule {
        cost,
        source: src,
        program,
        message: raw["message"]
            .as_str()
            .filter(|m| !m.trim().is_empty())
            .map(str::to_string),
        message_expr,
        reason,
        field_path,
        transition,
        optional_old_self,
    })
}

/// Compile every rule under `schema` (whose path in the CRD is `path`),
/// appending a cause for each rule that is malformed or not evaluable.
pub fn compile(schema: &Value, path: &str, correlatable: bool, causes: &mut Vec<Cause>) -> Node {
    let mut node = Node {
        type_name: schema["type"].as_str().unwrap_or("object").to_string(),
        ..Node::default()
    };
    for (i, raw) in schema["x-kubernetes-validations"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        node.rules
            .extend(compile_rule(raw, schema, &at, correlatable, causes));
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, sub) in props {
            let child = compile(
                sub,
                &format!("{path}.properties[{k}]"),
                correlatable,
                causes,
            );
            if !child.is_empty() {
                node.cost += child.cost;
                node.properties.insert(k.clone(), child);
            }
        }
    }
    if schema["additionalProperties"].is_object() {
        let child = compile(
            &schema["additionalProperties"],
            &format!("{path}.additionalProperties"),
            correlatable,
            causes,
        );
        node.cost += child.cost * super::cel_cost::bound(schema);
        node.additional = (!child.is_empty()).then(|| Box::new(child));
    }
    if schema["items"].is_object() {
        node.list_type = match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        };
        let items_correlate = correlatable && !matches!(node.list_type, ListType::Atomic);
        let child = compile(
            &schema["items"],
            &format!("{path}.items"),
            items_correlate,
            causes,
        );
        node.cost += child.cost * super::cel_cost::bound(schema);
        node.items = (!child.is_empty()).then(|| Box::new(child));
    }
    node.cost += node.rules.iter().map(|r| r.cost).sum::<f64>();
    node
}

/// One schema's compiled rules, or the causes that kept them from compiling.
type Compiled = Result<Node, Vec<Cause>>;

/// Compiled rules by the schema they came from; an entry whose schema was
/// dropped (its CRD version replaced or deleted) is evicted on the next miss.
static CACHE: Mutex<Vec<(Weak<Value>, Arc<Compiled>)>> = Mutex::new(Vec::new());

/// The compiled rules of a CRD version's schema: compiled on first use,
/// then shared by every request against that version.
pub fn rules_for(schema: &Arc<Value>) -> Arc<Compiled> {
    let mut cache = CACHE.lock();
    if let Some((_, c)) = cache
        .iter()
        .find(|(w, _)| w.upgrade().is_some_and(|s| Arc::ptr_eq(&s, schema)))
    {
        return c.clone();
    }
    cache.retain(|(w, _)| w.strong_count() > 0);
    let mut causes = Vec::new();
    let node = compile(schema, "openAPIV3Schema", true, &mut causes);
    let compiled = Arc::new(if causes.is_empty() {
        Ok(node)
    } else {
        Err(causes)
    });
    cache.push((Arc::downgrade(schema), compiled.clone()));
    compiled
}

/// A JSON value as CEL sees it.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => cel::Value::from(
            m.iter()
                .map(|(k, v)| (k.clone(), to_cel(v)))
                .collect::<HashMap<String, cel::Value>>(),
        ),
    }
}

fn field_of(path: &str, rule: &Rule) -> String {
    match &rule.field_path {
        None => path.to_string(),
        Some(f) if path.is_empty() => f.trim_start_matches('.').to_string(),
        Some(f) => format!("{path}{f}"),
    }
}

fn run_rule(
    node: &Node,
    rule: &Rule,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    if rule.transition && old.is_none() && !rule.optional_old_self {
        return;
    }
    let mut ctx = cel::Context::with_env(ENV.clone());
    ctx.add_variable_from_value("self", to_cel(v));
    if rule.transition {
        let old_self = match (old, rule.optional_old_self) {
            (Some(o), false) => to_cel(o),
            (Some(o), true) => cel::Value::Opaque(Arc::new(OptionalValue::of(to_cel(o)))),
            (None, _) => cel::Value::Opaque(Arc::new(OptionalValue::none())),
        };
        ctx.add_variable_from_value("oldSelf", old_self);
    }
    let detail = match rule.program.execute(&ctx) {
        Ok(cel::Value::Bool(true)) => return,
        Ok(cel::Value::Bool(false)) => rule
            .message_expr
            .as_ref()
            .and_then(|m| match m.execute(&ctx) {
                Ok(cel::Value::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                _ => None,
            })
            .or_else(|| rule.message.clone())
            .unwrap_or_else(|| format!("failed rule: {}", rule.source)),
        Ok(other) => format!(
            "rule {:?} did not evaluate to a bool: {other:?}",
            rule.source
        ),
        Err(e) => format!("rule {:?} could not be evaluated: {e}", rule.source),
    };
    let (reason, message) = match rule.reason {
        Reason::Invalid => (
            "FieldValueInvalid",
            format!("Invalid value: {:?}: {detail}", node.type_name),
        ),
        Reason::Forbidden => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        Reason::Required => ("FieldValueRequired", format!("Required value: {detail}")),
        Reason::Duplicate => (
            "FieldValueDuplicate",
            format!("Duplicate value: {detail:?}"),
        ),
    };
    cause(causes, reason, field_of(path, rule), message);
}

/// The old list item that corresponds to `item`, if the list type
/// correlates items.
fn old_item<'a>(list: &ListType, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    let old = old?.as_array()?;
    match list {
        ListType::Atomic => None,
        ListType::Set => old.iter().find(|o| *o == item),
        ListType::Map(keys) => old
            .iter()
            .find(|o| keys.iter().all(|k| o[k.as_str()] == item[k.as_str()])),
    }
}

/// Evaluate the rules of `node` on `v` (at `path`) and below, with `old` the
/// correlated old value on update; a cause per failed rule.
pub fn evaluate(node: &Node, v: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() || old == Some(v) {
        return;
    }
    for rule in &node.rules {
        run_rule(node, rule, v, old, path, causes);
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(map) => {
            for (k, child) in &node.properties {
                if let Some(value) = map.get(k) {
                    evaluate(child, value, old.and_then(|o| o.get(k)), &join(k), causes);
                }
            }
            if let Some(child) = &node.additional {
                for (k, value) in map {
                    evaluate(child, value, old.and_then(|o| o.get(k)), &join(k), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(child) = &node.items {
                for (i, item) in items.iter().enumerate() {
                    let o = old_item(&node.list_type, item, old);
                    evaluate(child, item, o, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(schema: Value) -> Node {
        let mut causes = Vec::new();
        let node = compile(&schema, "s", true, &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        node
    }

    fn run(node: &Node, v: Value, old: Option<Value>) -> Vec<(String, String, String)> {
        let mut causes = Vec::new();
        evaluate(node, &v, old.as_ref(), "", &mut causes);
        causes
            .into_iter()
            .map(|c| (c.reason, c.field, c.message))
            .collect()
    }

    #[test]
    fn compile_errors_name_the_rule_path() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self > 1"}, {"rule": "self >"}, {"rule": "isCIDR(self)"},
                {"rule": ""}, {"rule": "true", "fieldPath": "a"}]}}});
        let mut causes = Vec::new();
        compile(&schema, "s", true, &mut causes);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        let at = "s.properties[a].x-kubernetes-validations";
        assert_eq!(
            fields,
            [
                format!("{at}[1].rule"),
                format!("{at}[2].rule"),
                format!("{at}[3].rule"),
                format!("{at}[4].fieldPath"),
            ]
        );
        assert!(
            causes[1].message.contains("'isCIDR'"),
            "{}",
            causes[1].message
        );
    }

    #[test]
    fn self_is_bound_at_the_declaring_node_and_failures_become_causes() {
        let node = rules(json!({"type": "object", "properties": {
            "n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 3", "message": "small"}]},
            "l": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'"}]}},
            "m": {"type": "object", "additionalProperties": {"type": "string",
                "x-kubernetes-validations": [{"rule": "size(self) < 2", "reason": "FieldValueDuplicate"}]}}}}));
        assert!(run(&node, json!({"n": 2, "l": ["a"], "m": {"k": "v"}}), None).is_empty());
        // Causes come in property-name order.
        let got = run(
            &node,
            json!({"n": 5, "l": ["a", "x"], "m": {"k": "vv"}}),
            None,
        );
        assert_eq!(
            got,
            [
                (
                    "FieldValueInvalid".into(),
                    "l[1]".into(),
                    "Invalid value: \"string\": failed rule: self != 'x'".into()
                ),
                (
                    "FieldValueDuplicate".into(),
                    "m.k".into(),
                    "Duplicate value: \"failed rule: size(self) < 2\"".into()
                ),
                (
                    "FieldValueInvalid".into(),
                    "n".into(),
                    "Invalid value: \"integer\": small".into()
                ),
            ]
        );
    }

    #[test]
    fn transition_rules_need_an_old_value_and_unchanged_values_are_ratcheted() {
        let node = rules(json!({"type": "object", "properties": {
            "n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf"}, {"rule": "self != 7"}]},
            "o": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "oldSelf.hasValue() || self == 0", "optionalOldSelf": true}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}}}}));
        // Create: plain oldSelf rules do not run; the optional one does.
        assert!(run(&node, json!({"n": 1}), None).is_empty());
        assert_eq!(run(&node, json!({"o": 1}), None)[0].1, "o");
        // Update: oldSelf is the correlated old value.
        assert_eq!(run(&node, json!({"n": 1}), Some(json!({"n": 2})))[0].1, "n");
        assert!(run(&node, json!({"o": 1}), Some(json!({"o": 5}))).is_empty());
        // An unchanged value is not re-checked, even if it breaks a rule.
        assert!(run(&node, json!({"n": 7}), Some(json!({"n": 7}))).is_empty());
        assert_eq!(run(&node, json!({"n": 7}), Some(json!({"n": 6})))[0].1, "n");
        // Map-list items correlate by key, wherever they moved.
        let old = json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]});
        let new = json!({"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 3}, {"name": "c", "port": 9}]});
        let got = run(&node, new, Some(old));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "ports[1].port");
    }

    #[test]
    fn message_expression_and_field_path() {
        let node = rules(json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.a < 1", "messageExpression": "'a is ' + string(self.a)", "fieldPath": ".a", "reason": "FieldValueForbidden"},
            {"rule": "self.a < 0", "messageExpression": "self.a", "message": "fallback"}],
            "properties": {"a": {"type": "integer"}}}));
        let got = run(&node, json!({"a": 2}), None);
        assert_eq!(
            got[0],
            (
                "FieldValueForbidden".into(),
                "a".into(),
                "Forbidden: a is 2".into()
            )
        );
        assert_eq!(
            got[1].2, "Invalid value: \"object\": fallback",
            "a non-string messageExpression falls back"
        );
    }

    #[test]
    fn compiled_rules_are_cached_per_schema() {
        let a = Arc::new(json!({"type": "object", "x-kubernetes-validations": [{"rule": "true"}]}));
        let b = Arc::new((*a).clone());
        assert!(Arc::ptr_eq(&rules_for(&a), &rules_for(&a)));
        assert!(!Arc::ptr_eq(&rules_for(&a), &rules_for(&b)));
    }
}
