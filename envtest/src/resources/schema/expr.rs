//! Free-standing CEL expressions, as admission evaluates them (webhook
//! `matchConditions`, ValidatingAdmissionPolicy `validations`,
//! `messageExpression`s, `variables` and `matchConditions`): compiled once
//! in the same environment as CRD rules (the standard library, the strings
//! extension and the Kubernetes libraries envtest implements), refused when
//! they call a function envtest cannot evaluate or name a variable the
//! caller does not bind, and run against JSON values.

use super::cel_library::{ENV, Refs};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// The expression does not parse, or calls what envtest cannot run.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// Evaluation failed (a missing field, a type error...).
    #[error("{0}")]
    Eval(String),
    /// The expression gave a value of another type than expected.
    #[error("expected a {expected} result, got {got}")]
    Type {
        /// The expected CEL type.
        expected: &'static str,
        /// What the expression gave.
        got: String,
    },
}

/// A compiled expression.
pub struct Expression {
    program: cel::Program,
    /// The source text.
    pub source: String,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.source)
            .finish()
    }
}

/// A value an expression gave (kept as CEL holds it, so that a variable
/// can be bound again without a round trip through JSON).
#[derive(Debug, Clone)]
pub struct ExprValue(cel::Value);

/// The variables an expression runs with.
#[derive(Default)]
pub struct Activation {
    vars: HashMap<String, cel::Value>,
    variables: HashMap<String, cel::Value>,
}

impl Activation {
    /// An empty activation.
    pub fn new() -> Self {
        Activation::default()
    }

    /// Bind `name` to a JSON value (null stays null).
    pub fn json(mut self, name: &str, v: &Value) -> Self {
        self.vars.insert(name.to_string(), to_cel(v));
        self
    }

    /// Add `variables.<name>` (a ValidatingAdmissionPolicy variable).
    pub fn set_variable(&mut self, name: &str, v: ExprValue) {
        self.variables.insert(name.to_string(), v.0);
    }

    fn context(&self) -> cel::Context<'static, 'static> {
        let mut ctx = cel::Context::with_env(ENV.clone());
        for (k, v) in &self.vars {
            ctx.add_variable_from_value(k.clone(), v.clone());
        }
        if !self.variables.is_empty() {
            ctx.add_variable_from_value("variables", cel::Value::from(self.variables.clone()));
        }
        ctx
    }
}

impl Expression {
    /// Compile `src`, which may refer to the variables `allowed` only.
    pub fn compile(src: &str, allowed: &[&str]) -> Result<Expression, ExprError> {
        let p = ENV
            .compile(src)
            .map_err(|e| ExprError::Compile(e.to_string().replace('\n', " ")))?;
        if let Some(why) = Refs::of(p.expression()).unsupported_among(allowed) {
            return Err(ExprError::Compile(why));
        }
        Ok(Expression {
            program: p,
            source: src.to_string(),
        })
    }

    /// Run the expression.
    pub fn eval(&self, act: &Activation) -> Result<ExprValue, ExprError> {
        self.program
            .execute(&act.context())
            .map(ExprValue)
            .map_err(|e| ExprError::Eval(e.to_string()))
    }

    /// Run an expression that must give a bool.
    pub fn eval_bool(&self, act: &Activation) -> Result<bool, ExprError> {
        match self.eval(act)?.0 {
            cel::Value::Bool(b) => Ok(b),
            other => Err(ExprError::Type {
                expected: "bool",
                got: format!("{other:?}"),
            }),
        }
    }
}

impl Expression {
    /// Run an expression that must give a string.
    pub fn eval_string(&self, act: &Activation) -> Result<String, ExprError> {
        match self.eval(act)?.0 {
            cel::Value::String(s) => Ok(s.to_string()),
            other => Err(ExprError::Type {
                expected: "string",
                got: format!("{other:?}"),
            }),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_see_their_variables() {
        let e = Expression::compile("object.metadata.name.startsWith('x')", &["object"]).unwrap();
        let act = Activation::new().json("object", &json!({"metadata": {"name": "xy"}}));
        assert!(e.eval_bool(&act).unwrap());
        assert!(Expression::compile("oldSelf == 1", &["object"]).is_err());
        assert!(Expression::compile("object.x.ip()", &["object"]).is_err());
    }

    #[test]
    fn variables_are_bound_under_variables() {
        let v = Expression::compile("object.spec.replicas * 2", &["object"]).unwrap();
        let mut act = Activation::new().json("object", &json!({"spec": {"replicas": 3}}));
        let val = v.eval(&act).unwrap();
        act.set_variable("double", val);
        let e = Expression::compile("variables.double == 6", &["object", "variables"]).unwrap();
        assert!(e.eval_bool(&act).unwrap());
        let m = Expression::compile("'n=' + string(variables.double)", &["variables"]).unwrap();
        assert_eq!(m.eval_string(&act).unwrap(), "n=6");
    }
}
