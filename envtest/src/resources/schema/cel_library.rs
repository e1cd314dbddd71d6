//! The CEL environment `x-kubernetes-validations` rules compile against, and
//! the check that a rule only calls what that environment really provides.
//!
//! The API server type-checks a rule against the Kubernetes CEL libraries
//! when the CRD is written; the `cel` crate has no type checker, so envtest
//! walks the parsed rule instead and refuses, naming it, every function that
//! is not in [`SUPPORTED`] and every variable other than `self`, `oldSelf`
//! and the rule's own comprehension variables. A rule that passes may still
//! fail at evaluation (a missing field, a type mismatch): the object is then
//! refused with the evaluation error, never silently accepted.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};
use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

/// Functions and operators a rule may call: the CEL standard library, the
/// strings extension and optionals (as the API server's environment has
/// them), the Kubernetes regex and list functions of [`super::cel_k8s`],
/// the quantity library of [`super::cel_quantity`] and the URL library of
/// [`super::cel_url`]. Everything else the Kubernetes libraries define
/// (`ip`, `cidr`, `format.*`, `semver`) is refused at CRD write.
const SUPPORTED: &[&str] = &[
    // Operators.
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "!_",
    "-_",
    "_&&_",
    "_||_",
    "_?_:_",
    "_[_]",
    "_[?_]",
    "_?._",
    "@in",
    "@not_strictly_false",
    // Standard library.
    "size",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
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
    // Strings extension.
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "strings.quote",
    // Kubernetes regex and list libraries.
    "find",
    "findAll",
    "isSorted",
    "sum",
    "min",
    "max",
    // Kubernetes sets library.
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    // Kubernetes quantity library.
    "quantity",
    "isQuantity",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    // Kubernetes URL library.
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    // Optionals (`oldSelf` under `optionalOldSelf: true`).
    "hasValue",
    "value",
    "orValue",
    "or",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
];

/// Namespaces whose functions are called as `namespace.function(...)`.
const NAMESPACES: &[&str] = &["strings", "optional", "sets"];

/// The shared environment every rule is compiled and run in.
pub(super) static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    // The strings extension and the Kubernetes functions register only new
    // overloads on a stdlib environment, so this cannot fail; were it to, the rules calling its
    // functions would be refused at evaluation, never accepted.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(super::cel_k8s::extension);
    let _ = env.add_extension(super::cel_quantity::extension);
    let _ = env.add_extension(super::cel_url::extension);
    Arc::new(env)
});

/// What a parsed rule refers to.
#[derive(Default)]
pub(super) struct Refs {
    /// Called functions and operators (namespaced ones as `ns.name`).
    pub functions: BTreeSet<String>,
    /// Free variables (comprehension variables excluded).
    pub variables: BTreeSet<String>,
}

impl Refs {
    /// Collect the functions and free variables of `expr`.
    pub fn of(expr: &IdedExpr) -> Refs {
        let mut refs = Refs::default();
        walk(expr, &mut Vec::new(), &mut refs);
        refs
    }

    /// Why the rule cannot be evaluated by envtest, if it cannot.
    pub fn unsupported(&self) -> Option<String> {
        self.unsupported_among(&["self", "oldSelf"])
    }

    /// Why an expression that may refer to the variables `allowed` cannot
    /// be evaluated by envtest, if it cannot.
    pub fn unsupported_among(&self, allowed: &[&str]) -> Option<String> {
        if let Some(f) = self
            .functions
            .iter()
            .find(|f| !SUPPORTED.contains(&f.as_str()))
        {
            return Some(format!(
                "undeclared reference to '{f}': envtest does not support this CEL function, so it refuses the rule rather than not enforce it"
            ));
        }
        self.variables
            .iter()
            .find(|v| !allowed.contains(&v.as_str()))
            .map(|v| format!("undeclared reference to '{v}'"))
    }
}

fn walk(e: &IdedExpr, bound: &mut Vec<String>, refs: &mut Refs) {
    match &e.expr {
        Expr::Call(call) => {
            match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) => {
                    refs.functions.insert(format!("{ns}.{}", call.func_name));
                }
                _ => {
                    refs.functions.insert(call.func_name.clone());
                    if let Some(t) = &call.target {
                        walk(t, bound, refs);
                    }
                }
            }
            for a in &call.args {
                walk(a, bound, refs);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, bound, refs);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.iter().cloned());
            bound.push(c.accu_var.clone());
            for part in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, bound, refs);
            }
            bound.truncate(before);
        }
        Expr::Ident(name) => {
            if !name.starts_with('@') && !bound.contains(name) {
                refs.variables.insert(name.clone());
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, bound, refs)),
        Expr::Map(m) => m.entries.iter().for_each(|x| entry(&x.expr, bound, refs)),
        Expr::Struct(s) => s.entries.iter().for_each(|x| entry(&x.expr, bound, refs)),
        Expr::Select(s) => walk(&s.operand, bound, refs),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(e: &EntryExpr, bound: &mut Vec<String>, refs: &mut Refs) {
    match e {
        EntryExpr::StructField(f) => walk(&f.value, bound, refs),
        EntryExpr::MapEntry(m) => {
            walk(&m.key, bound, refs);
            walk(&m.value, bound, refs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(src: &str) -> Refs {
        Refs::of(ENV.compile(src).unwrap().expression())
    }

    #[test]
    fn comprehension_variables_are_bound_and_functions_named() {
        let r = refs("self.items.all(i, i.name.startsWith('a')) && size(self.x) > 1");
        assert_eq!(r.variables.iter().collect::<Vec<_>>(), ["self"]);
        assert!(r.functions.contains("startsWith"));
        assert!(r.functions.contains("size"));
        assert!(r.unsupported().is_none(), "{:?}", r.functions);
    }

    #[test]
    fn unknown_functions_and_variables_are_named() {
        let r = refs("quantity(self.limit).isGreaterThan(quantity('1Gi'))");
        assert!(r.unsupported().is_none(), "{:?}", r.unsupported());
        assert!(refs("url(self.u).getHost() == 'x'").unsupported().is_none());
        assert!(refs("ip(self.a).family() == 4").unsupported().is_some());
        assert!(
            refs("self.a.isIPv4()")
                .unsupported()
                .unwrap()
                .contains("'isIPv4'")
        );
        assert_eq!(
            refs("other > 1").unsupported().unwrap(),
            "undeclared reference to 'other'"
        );
        assert!(refs("oldSelf.orValue(1) <= self").unsupported().is_none());
        assert!(refs("optional.none() == oldSelf").unsupported().is_none());
    }

    /// Every supported name really is in the environment: a program calling
    /// each one runs without an "undeclared" or "no overload" error.
    #[test]
    fn every_supported_function_exists_in_the_environment() {
        let samples = [
            "size('ab') == 2 && 'abc'.matches('^a') && 'abc'.contains('b')",
            "'abc'.startsWith('a') && 'abc'.endsWith('c') && int('1') == 1 && uint(1) == 1u",
            "double(1) == 1.0 && string(1) == '1' && bytes('a') == b'a' && bool('true')",
            "type(1) == int && dyn(1) == 1 && duration('1s') < duration('2s')",
            "timestamp('2020-01-02T03:04:05Z').getFullYear() == 2020",
            "timestamp('2020-01-02T03:04:05Z').getMonth() == 0 && timestamp('2020-01-02T03:04:05Z').getDayOfYear() == 1",
            "timestamp('2020-01-02T03:04:05Z').getDayOfMonth() == 1 && timestamp('2020-01-02T03:04:05Z').getDate() == 2",
            "timestamp('2020-01-02T03:04:05Z').getDayOfWeek() == 4 && timestamp('2020-01-02T03:04:05Z').getHours() == 3",
            "timestamp('2020-01-02T03:04:05Z').getMinutes() == 4 && timestamp('2020-01-02T03:04:05Z').getSeconds() == 5",
            "timestamp('2020-01-02T03:04:05Z').getMilliseconds() == 0",
            "'abc'.charAt(1) == 'b' && 'abc'.indexOf('c') == 2 && 'abca'.lastIndexOf('a') == 3",
            "'aB'.lowerAscii() == 'ab' && 'aB'.upperAscii() == 'AB' && 'aa'.replace('a', 'b') == 'bb'",
            "'a,b'.split(',') == ['a', 'b'] && 'abc'.substring(1) == 'bc' && ' a '.trim() == 'a'",
            "['a', 'b'].join('-') == 'a-b' && strings.quote('a') == '\"a\"'",
            "optional.of(1).hasValue() && optional.of(1).value() == 1 && optional.none().orValue(2) == 2",
            "optional.none().or(optional.of(1)).value() == 1 && !optional.ofNonZeroValue(0).hasValue()",
            "'a1b22'.find('[0-9]+') == '1' && 'a1b22'.findAll('[0-9]+') == ['1', '22'] && 'a1b22'.findAll('[0-9]+', 1) == ['1']",
            "[1, 2, 2].isSorted() && ![2, 1].isSorted() && [1, 2].sum() == 3 && [1.5, 2.0].sum() == 3.5 && [].sum() == 0",
            "[3, 1, 2].min() == 1 && ['b', 'c', 'a'].max() == 'c' && [1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
            "[1, 2].indexOf(3) == -1 && 'abc'.indexOf('c') == 2",
            "isQuantity('1Gi') && quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1').isLessThan(quantity('2'))",
            "quantity('1').compareTo(quantity('1')) == 0 && quantity('1').sign() == 1 && quantity('1').isInteger()",
            "quantity('1').asInteger() == 1 && quantity('1').asApproximateFloat() == 1.0",
            "quantity('1').add(1) == quantity('2') && quantity('2').sub(quantity('1')) == quantity('1')",
            "isURL('https://h:1/p?q=v') && url('https://h:1/p').getScheme() == 'https' && url('https://h:1/p').getHost() == 'h:1'",
            "url('https://h:1/p').getHostname() == 'h' && url('https://h:1/p').getPort() == '1'",
            "url('https://h/p').getEscapedPath() == '/p' && url('https://h/?q=v').getQuery() == {'q': ['v']}",
            // Results documented for the Kubernetes sets library.
            "sets.contains([], []) && sets.contains([1, 2, 3, 4], [2, 3]) && !sets.contains([1, 2, 3], [3, 4])",
            "sets.equivalent([], []) && sets.equivalent([1], [1, 1]) && sets.equivalent([1, 2, 3], [3, 2, 1]) && !sets.equivalent([1, 2], [1, 2, 3])",
            "!sets.intersects([], []) && !sets.intersects([1], []) && sets.intersects([1], [1, 2]) && !sets.intersects([1, 2], [3])",
            "[1, 2].exists(x, x == 2) && {'a': 1}['a'] == 1 && 1 in [1] && -(1) == -1 && 3 % 2 == 1",
            "!(1 != 1) && 2 * 2 / 2 - 1 + 0 >= 1 && 1 <= 1 && (true ? 1 : 2) == 1 && [1].all(x, x > 0)",
        ];
        let ctx = cel::Context::with_env(ENV.clone());
        for s in samples {
            let p = ENV.compile(s).unwrap();
            assert_eq!(p.execute(&ctx), Ok(cel::Value::Bool(true)), "{s}");
        }
    }
}
