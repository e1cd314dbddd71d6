//! Estimated cost of a CEL rule, checked when its CRD is written, so no
//! rule can make the server loop or allocate without bound when it runs.
//!
//! The API server estimates each rule's worst-case cost from the schema
//! (`maxItems`, `maxProperties`, `maxLength`; a value without such a bound
//! is as large as the 3 MiB request limit allows) and refuses a rule whose
//! estimate exceeds the per-rule limit, and a CRD whose rules together
//! (each times the number of times it can run: the bounds of the lists and
//! maps above it) exceed the per-CRD limit. This estimator follows the same
//! idea with the same limits and messages; its unit costs are simpler than
//! cel-go's, so a rule near the limit may be judged differently, but a rule
//! it accepts is bounded: objects are checked against their schema (every
//! bound) before any rule runs, so the estimate bounds the work done.
//!
//! Costs: one per call or field selection (reading a variable is free); a traversal of a string costs a tenth of its
//! length, of a list its length; a comprehension (`all`, `exists`, `map`,
//! `filter`, ...) costs its range's size times its body. Sizes (a string's
//! length, a list's or map's cardinality) flow through `+`, `replace`,
//! `join`, `split` and the macros, so a rule that builds a huge value is
//! refused as a rule that loops too long is.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use serde_json::Value;

/// The request size limit every unbounded value is measured against.
const MAX_REQUEST: f64 = 3.0 * 1024.0 * 1024.0;
/// The most a single rule may cost (the API server's per-expression limit).
pub const RULE_LIMIT: f64 = 10_000_000.0;
/// The most all rules of a CRD version may cost together.
pub const CRD_LIMIT: f64 = 100_000_000.0;

/// Functions that answer a scalar (size one) whatever their inputs.
const SCALAR: &[&str] = &[
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "@in",
    "@not_strictly_false",
    "size",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "int",
    "uint",
    "double",
    "bool",
    "isSorted",
    "sum",
    "min",
    "max",
    "indexOf",
    "lastIndexOf",
    "isQuantity",
    "isURL",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "hasValue",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "duration",
    "timestamp",
    "type",
];

/// Functions that read their string or list input from end to end.
const TRAVERSING: &[&str] = &[
    "_==_",
    "_!=_",
    "@in",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "find",
    "findAll",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "trim",
    "substring",
    "split",
    "isSorted",
    "sum",
    "min",
    "max",
    "quantity",
    "isQuantity",
    "url",
    "isURL",
    "string",
    "strings.quote",
    "bytes",
];

/// The largest a value at `node` can be: its length, items or properties.
pub fn bound(node: &Value) -> f64 {
    let declared = |k: &str| node[k].as_u64().map(|n| n as f64);
    match node["type"].as_str() {
        Some("string") => declared("maxLength").unwrap_or(MAX_REQUEST),
        // An item takes at least two bytes of the request (`0,`).
        Some("array") => declared("maxItems").unwrap_or(MAX_REQUEST / 2.0),
        Some("object") => declared("maxProperties").unwrap_or_else(|| {
            if node["additionalProperties"].is_object()
                || node["x-kubernetes-preserve-unknown-fields"] == true
            {
                // `"":0,` is the smallest entry.
                MAX_REQUEST / 5.0
            } else {
                node["properties"]
                    .as_object()
                    .map_or(0.0, |p| p.len() as f64)
            }
        }),
        Some(_) => 1.0,
        None if node["x-kubernetes-int-or-string"] == true => MAX_REQUEST,
        None => MAX_REQUEST,
    }
}

/// The schema of what a list or map at `node` holds.
fn element(node: &Value) -> Option<&Value> {
    match node["type"].as_str() {
        Some("array") => node.get("items"),
        Some("object") => node.get("additionalProperties").filter(|a| a.is_object()),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Est<'a> {
    cost: f64,
    size: f64,
    node: Option<&'a Value>,
}

impl Est<'_> {
    fn scalar(cost: f64) -> Self {
        Est {
            cost,
            size: 1.0,
            node: None,
        }
    }
}

fn of_node(node: Option<&Value>, cost: f64) -> Est<'_> {
    Est {
        cost,
        size: node.map_or(MAX_REQUEST, bound),
        node,
    }
}

struct Scope<'a> {
    vars: Vec<(String, Est<'a>)>,
    /// Field selections the schema rules out, as the type checker words them.
    problems: Vec<String>,
}

/// A property name as the schema spells it, from CEL's escaped form
/// (`__dash__` for `-`, `__dot__`, `__slash__`, `__underscores__`, and
/// `__{keyword}__` for a CEL reserved word).
fn unescape(field: &str) -> String {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if let Some(word) = field.strip_prefix("__").and_then(|f| f.strip_suffix("__"))
        && RESERVED.contains(&word)
    {
        return word.to_string();
    }
    field
        .replace("__underscores__", "\u{0}")
        .replace("__dot__", ".")
        .replace("__dash__", "-")
        .replace("__slash__", "/")
        .replace('\u{0}', "__")
}

/// Why selecting `field` on a value of schema `node` cannot type-check.
fn selection_problem(node: &Value, field: &str) -> Option<String> {
    match node["type"].as_str() {
        Some(t @ ("string" | "integer" | "number" | "boolean")) => Some(format!(
            "type '{}' does not support field selection",
            cel_type(t)
        )),
        Some("object") => {
            let props = node["properties"].as_object()?;
            let open = node["additionalProperties"].is_object()
                || node["additionalProperties"] == true
                || node["x-kubernetes-preserve-unknown-fields"] == true
                || matches!(field, "apiVersion" | "kind" | "metadata");
            (!open && !props.contains_key(&unescape(field)))
                .then(|| format!("undefined field '{field}'"))
        }
        _ => None,
    }
}

fn cel_type(schema_type: &str) -> &str {
    match schema_type {
        "integer" => "int",
        "number" => "double",
        "boolean" => "bool",
        other => other,
    }
}

impl<'a> Scope<'a> {
    fn get(&self, name: &str) -> Option<Est<'a>> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, e)| *e)
    }

    fn expr(&mut self, e: &IdedExpr) -> Est<'a> {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => Est {
                cost: 0.0,
                size: s.len() as f64,
                node: None,
            },
            Expr::Literal(_) | Expr::Unspecified => Est::scalar(0.0),
            Expr::Ident(name) => self
                .get(name)
                .map(|v| Est { cost: 0.0, ..v })
                .unwrap_or(Est::scalar(0.0)),
            Expr::Select(s) => {
                let operand = self.expr(&s.operand);
                if let Some(problem) = operand.node.and_then(|n| selection_problem(n, &s.field)) {
                    self.problems.push(problem);
                }
                if s.test {
                    return Est::scalar(operand.cost + 1.0);
                }
                let node = operand.node.and_then(|n| {
                    n["properties"]
                        .get(unescape(&s.field))
                        .or_else(|| element(n).filter(|_| n["type"] == "object"))
                });
                of_node(node, operand.cost + 1.0)
            }
            Expr::List(l) => {
                let parts: Vec<Est> = l.elements.iter().map(|x| self.expr(x)).collect();
                Est {
                    cost: 1.0 + parts.iter().map(|p| p.cost).sum::<f64>(),
                    size: parts.len() as f64,
                    node: None,
                }
            }
            Expr::Map(m) => {
                let mut cost = 1.0;
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        cost += self.expr(&me.key).cost + self.expr(&me.value).cost;
                    }
                }
                Est {
                    cost,
                    size: m.entries.len() as f64,
                    node: None,
                }
            }
            Expr::Struct(s) => {
                let mut cost = 1.0;
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost += self.expr(&f.value).cost;
                    }
                }
                Est::scalar(cost)
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range);
                let elem = range.node.and_then(element);
                let is_map = range.node.is_some_and(|n| n["type"] == "object");
                let key = Est {
                    cost: 0.0,
                    size: MAX_REQUEST,
                    node: None,
                };
                let first = if is_map { key } else { of_node(elem, 0.0) };
                let before = self.vars.len();
                self.vars.push((c.iter_var.clone(), first));
                if let Some(v2) = &c.iter_var2 {
                    self.vars.push((v2.clone(), of_node(elem, 0.0)));
                }
                self.vars.push((
                    c.accu_var.clone(),
                    Est {
                        cost: 0.0,
                        size: range.size,
                        node: None,
                    },
                ));
                let init = self.expr(&c.accu_init).cost;
                let step = self.expr(&c.loop_cond).cost + self.expr(&c.loop_step).cost;
                let result = self.expr(&c.result).cost;
                self.vars.truncate(before);
                Est {
                    cost: range.cost + init + range.size * step.max(1.0) + result,
                    size: range.size,
                    node: None,
                }
            }
            Expr::Call(call) => self.call(call),
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> Est<'a> {
        let name = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if matches!(ns.as_str(), "strings" | "optional") => {
                format!("{ns}.{}", call.func_name)
            }
            _ => call.func_name.clone(),
        };
        let target = match call.target.as_deref() {
            Some(t) if !name.contains('.') => Some(self.expr(t)),
            _ => None,
        };
        let args: Vec<Est> = call.args.iter().map(|a| self.expr(a)).collect();
        let ins: Vec<Est> = target.iter().chain(args.iter()).copied().collect();
        let mut cost = 1.0 + ins.iter().map(|e| e.cost).sum::<f64>();
        let first = ins.first().copied().unwrap_or(Est::scalar(0.0));
        let largest = ins.iter().map(|e| e.size).fold(1.0, f64::max);
        if TRAVERSING.contains(&name.as_str()) {
            cost += 0.1 * ins.iter().map(|e| e.size).sum::<f64>();
        }
        let size = match name.as_str() {
            "_+_" => {
                let s = ins.iter().map(|e| e.size).sum::<f64>();
                cost += 0.1 * s;
                s
            }
            "replace" => {
                // Every position may be replaced (an empty `old` matches
                // between all characters).
                let new = args.get(1).map_or(1.0, |e| e.size.max(1.0));
                let s = first.size * (new + 1.0);
                cost += 0.1 * s;
                s
            }
            "join" => {
                let item = first.node.and_then(element).map_or(MAX_REQUEST, bound);
                let sep = args.first().map_or(0.0, |e| e.size);
                let s = first.size * (item + sep);
                cost += 0.1 * s;
                s
            }
            "sets.contains" | "sets.equivalent" | "sets.intersects" => {
                // Every element of one list is looked up in the other.
                cost += ins.iter().map(|e| e.size).product::<f64>();
                1.0
            }
            "_[_]" | "_[?_]" => {
                let node = first.node.and_then(element);
                return of_node(node, cost);
            }
            "_?_:_" => args.iter().skip(1).map(|e| e.size).fold(1.0, f64::max),
            n if SCALAR.contains(&n) => 1.0,
            _ => largest,
        };
        let node = match name.as_str() {
            "_?_:_" | "orValue" | "value" | "or" | "dyn" | "optional.of" => {
                ins.iter().rev().find_map(|e| e.node)
            }
            _ => None,
        };
        Est { cost, size, node }
    }
}

/// The estimated worst-case cost of `expr` run with `self` (and `oldSelf`)
/// bound to values of the schema node `node`, and the field selections
/// that cannot type-check against the schema (`undefined field 'x'`,
/// `type 'string' does not support field selection`).
pub fn analyze(expr: &IdedExpr, node: &Value) -> (f64, Vec<String>) {
    let at = of_node(Some(node), 0.0);
    let mut scope = Scope {
        vars: vec![("self".into(), at), ("oldSelf".into(), at)],
        problems: Vec::new(),
    };
    let cost = scope.expr(expr).cost;
    (cost, scope.problems)
}

/// The estimated worst-case cost alone (see [`analyze`]).
#[cfg(test)]
pub fn estimate(expr: &IdedExpr, node: &Value) -> f64 {
    analyze(expr, node).0
}

/// The API server's message for a cost over `limit` (`what` names the
/// cost, e.g. `estimated rule cost`).
pub fn over_budget(what: &str, cost: f64, limit: f64) -> String {
    let factor = cost / limit;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "Forbidden: {what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cost(rule: &str, node: &Value) -> f64 {
        let p = super::super::cel_library::ENV.compile(rule).unwrap();
        estimate(p.expression(), node)
    }

    #[test]
    fn selections_are_checked_against_the_schema() {
        let node = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "my-field": {"type": "integer"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}}});
        let problems = |rule: &str| {
            let p = super::super::cel_library::ENV.compile(rule).unwrap();
            analyze(p.expression(), &node).1
        };
        for ok in [
            "self.name == 'a' && self.my__dash__field > 1 && has(self.labels.anything)",
            "self.items.all(i, i.port > 0) && self.metadata.name != ''",
            "self.labels.all(k, self.labels[k].size() > 0)",
        ] {
            assert!(problems(ok).is_empty(), "{ok}: {:?}", problems(ok));
        }
        assert_eq!(problems("self.nmae == 'a'"), ["undefined field 'nmae'"]);
        assert_eq!(problems("has(self.ghost)"), ["undefined field 'ghost'"]);
        assert_eq!(
            problems("self.items.all(i, i.prot > 0)"),
            ["undefined field 'prot'"]
        );
        assert_eq!(
            problems("self.name.first == 'a'"),
            ["type 'string' does not support field selection"]
        );
    }

    #[test]
    fn bounds_decide_what_a_rule_may_do() {
        let unbounded = json!({"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "string"}},
            "s": {"type": "string"}, "n": {"type": "integer"}}});
        let bounded = json!({"type": "object", "properties": {
            "l": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}},
            "s": {"type": "string", "maxLength": 100}, "n": {"type": "integer"}}});
        for cheap in ["self.n > 1", "self.s.startsWith('x')", "self.l.size() < 5"] {
            assert!(cost(cheap, &unbounded) < RULE_LIMIT, "{cheap}");
        }
        for heavy in [
            "self.l.all(a, self.l.all(b, a == b))",
            "self.l.all(a, a.matches('^[a-z]+$'))",
            "self.s.replace('', self.s).size() > 0",
            "self.l.map(a, self.l.map(b, self.l)).size() > 0",
        ] {
            assert!(
                cost(heavy, &unbounded) > RULE_LIMIT,
                "{heavy} on unbounded values"
            );
        }
        for fine in [
            "self.l.all(a, self.l.all(b, a == b))",
            "self.l.all(a, a.matches('^[a-z]+$'))",
            "self.s.replace('', self.s).size() > 0",
        ] {
            assert!(
                cost(fine, &bounded) < RULE_LIMIT,
                "{fine} on bounded values"
            );
        }
        assert!(
            cost(
                "self.l.map(a, self.l.map(b, self.l.map(c, self.l.map(d, 1)))).size() > 0",
                &bounded
            ) > RULE_LIMIT,
            "100^4 iterations"
        );
    }
}
