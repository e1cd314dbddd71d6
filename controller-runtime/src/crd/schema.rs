//! Rewriting a JSON Schema produced by `schemars` into the *structural*
//! OpenAPI v3 subset the API server accepts in a CustomResourceDefinition.
//!
//! The rules, each applied wherever it occurs in the tree:
//! - `$ref`s are inlined (a recursive type is refused: structural schemas
//!   cannot describe it), sibling keywords such as `description` win;
//! - `type: [T, "null"]` and `anyOf`/`oneOf` with a `null` member become
//!   `nullable: true`;
//! - `const` becomes a one-value `enum`; unit-variant enums become
//!   `type: string` with an `enum`;
//! - an `integer`/`string` union becomes `x-kubernetes-int-or-string`;
//! - `anyOf`/`oneOf`/`allOf` of objects (serde's externally, internally and
//!   adjacently tagged and untagged enums, flattened fields) are merged into
//!   one object whose properties are the union of the members'; externally
//!   tagged enums keep a `oneOf` of `required` lists so exactly one variant
//!   is set; a property two variants type differently is widened (an
//!   adjacently tagged enum whose content is a string in one variant and an
//!   object in another keeps an untyped `x-kubernetes-preserve-unknown-fields`
//!   node: the server stores it as written and no longer validates it);
//! - a union of strings and objects (unit variants beside struct or newtype
//!   variants of an externally tagged enum, or an untagged string-or-object)
//!   becomes an untyped `x-kubernetes-preserve-unknown-fields` node the same
//!   way, since one node cannot be typed both;
//! - a schema that accepts anything (`serde_json::Value`) becomes
//!   `x-kubernetes-preserve-unknown-fields`, and so does a map of such values;
//! - `exclusiveMinimum: n` (JSON Schema 2020-12) becomes `minimum: n,
//!   exclusiveMinimum: true` (OpenAPI v3), `uniqueItems` on scalar lists
//!   becomes `x-kubernetes-list-type: set`, formats the API server does not
//!   know are dropped, and keywords it refuses (`$schema`, `title`,
//!   `examples`, `readOnly`, `additionalProperties: false`...) are removed.
//!
//! Whatever cannot be made structural (unions of other unrelated types, such
//! as a boolean and a string; recursion) is a
//! [`SchemaError`] naming the JSON path where it happened.

mod merge;

use merge::{dedup, merge_into, merge_objects};
use serde_json::{Map, Value, json};

/// Why a schema could not be made structural.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A type refers to itself; a structural schema would be infinite.
    #[error(
        "at {path}: type `{name}` is recursive; structural schemas cannot describe it (use #[schemars(schema_with = ...)] to cut the cycle)"
    )]
    Recursive {
        /// JSON path of the recursive use.
        path: String,
        /// The schemars name of the type.
        name: String,
    },
    /// A `$ref` names no definition.
    #[error("at {path}: unresolved reference `{reference}`")]
    UnresolvedRef {
        /// JSON path of the reference.
        path: String,
        /// The reference as written.
        reference: String,
    },
    /// The schema cannot be expressed structurally.
    #[error("at {path}: {reason}")]
    NonStructural {
        /// JSON path of the offending node.
        path: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
}

/// Formats the API server validates (anything else is dropped).
const KNOWN_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// Keywords kept as they are (after their children are rewritten).
const KEPT: &[&str] = &[
    "type",
    "format",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "nullable",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "example",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
];

/// Rewrites `schema` (whose `$ref`s point into `definitions`, keyed by
/// definition name) into a structural schema.
///
/// ```
/// use controller_runtime::crd::schema::structural;
/// use serde_json::{json, Map};
///
/// let mut defs = Map::new();
/// defs.insert("Mode".into(), json!({"type": "string", "enum": ["Fast", "Slow"]}));
/// let schema = json!({
///     "type": "object",
///     "properties": {
///         "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]},
///         "replicas": {"type": ["integer", "null"], "format": "uint32", "minimum": 0}
///     }
/// });
/// let out = structural(schema, &defs).unwrap();
/// assert_eq!(out, json!({
///     "type": "object",
///     "properties": {
///         "mode": {"type": "string", "enum": ["Fast", "Slow"], "nullable": true},
///         "replicas": {"type": "integer", "minimum": 0, "nullable": true}
///     }
/// }));
/// ```
pub fn structural(schema: Value, definitions: &Map<String, Value>) -> Result<Value, SchemaError> {
    let mut rw = Rewriter {
        defs: definitions,
        stack: Vec::new(),
    };
    rw.node(schema, "")
}

struct Rewriter<'a> {
    defs: &'a Map<String, Value>,
    stack: Vec<String>,
}

fn non_structural(path: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError::NonStructural {
        path: display_path(path),
        reason: reason.into(),
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        ".".into()
    } else {
        path.into()
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
        || v.get("const").is_some_and(Value::is_null)
        || v.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.len() == 1 && e[0].is_null())
}

/// A union member that only constrains which properties are set.
fn is_validation_only(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| !o.is_empty() && o.keys().all(|k| k == "required"))
}

fn type_of(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

fn truthy(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool) == Some(true)
}

fn preserve_unknown() -> Value {
    json!({"x-kubernetes-preserve-unknown-fields": true})
}

impl Rewriter<'_> {
    fn node(&mut self, schema: Value, path: &str) -> Result<Value, SchemaError> {
        let mut obj = match schema {
            Value::Bool(true) => return Ok(preserve_unknown()),
            Value::Bool(false) => {
                return Err(non_structural(path, "a schema that accepts nothing"));
            }
            Value::Object(obj) => obj,
            other => {
                return Err(non_structural(path, format!("not a schema: {other}")));
            }
        };

        if let Some(reference) = obj.remove("$ref") {
            return self.reference(reference, obj, path);
        }

        // `type: [T, "null"]`.
        let mut nullable = truthy(&Value::Object(obj.clone()), "nullable");
        if let Some(Value::Array(types)) = obj.get("type").cloned() {
            let mut rest: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
            if rest.len()
                < obj
                    .get("type")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            {
                nullable = true;
            }
            match rest.len() {
                0 => {
                    obj.remove("type");
                }
                1 => {
                    obj.insert("type".into(), rest.remove(0));
                }
                _ => {
                    let names: Vec<&str> = rest.iter().filter_map(Value::as_str).collect();
                    if names.len() == 2 && names.contains(&"integer") && names.contains(&"string") {
                        obj.remove("type");
                        obj.insert("x-kubernetes-int-or-string".into(), true.into());
                    } else {
                        return Err(non_structural(
                            path,
                            format!(
                                "a value of several types {names:?}; structural schemas allow one type (or integer-or-string)"
                            ),
                        ));
                    }
                }
            }
        }

        // `const` becomes a one-value enum.
        if let Some(c) = obj.remove("const") {
            if !obj.contains_key("type")
                && let Some(t) = json_type(&c)
            {
                obj.insert("type".into(), t.into());
            }
            obj.insert("enum".into(), Value::Array(vec![c]));
        }

        // Unions.
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(members)) = obj.remove(key) {
                if members.iter().all(is_validation_only) {
                    // Already structural (`oneOf: [{required: [..]}, ..]`).
                    obj.insert(key.into(), Value::Array(members));
                    continue;
                }
                let (nulls, members): (Vec<Value>, Vec<Value>) =
                    members.into_iter().partition(is_null_schema);
                if !nulls.is_empty() {
                    nullable = true;
                }
                if members.is_empty() {
                    continue;
                }
                let merged = self.union(members, path)?;
                obj = merge_into(obj, merged, path)?;
            }
        }
        if let Some(Value::Array(members)) = obj.remove("allOf") {
            for (i, m) in members.into_iter().enumerate() {
                let m = self.node(m, &format!("{path}.allOf[{i}]"))?;
                obj = merge_into(obj, m, path)?;
            }
        }

        // Children.
        if let Some(Value::Object(props)) = obj.remove("properties") {
            let mut out = Map::new();
            for (name, p) in props {
                let p = self.node(p, &format!("{path}.{name}"))?;
                out.insert(name, p);
            }
            obj.insert("properties".into(), Value::Object(out));
        }
        if let Some(items) = obj.remove("items") {
            if items.is_array() {
                return Err(non_structural(
                    path,
                    "a tuple (positional items); use a struct or a Vec of one type",
                ));
            }
            let items = self.node(items, &format!("{path}[*]"))?;
            obj.insert("items".into(), items);
        }
        if obj.contains_key("prefixItems") {
            return Err(non_structural(
                path,
                "a tuple (prefixItems); use a struct or a Vec of one type",
            ));
        }
        match obj.remove("additionalProperties") {
            Some(Value::Bool(true)) => {
                obj.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
            }
            Some(Value::Bool(false)) | None => {}
            Some(ap) => {
                let ap = self.node(ap, &format!("{path}.*"))?;
                if obj.contains_key("properties") {
                    return Err(non_structural(
                        path,
                        "both named properties and additionalProperties (a flattened map next to fields)",
                    ));
                }
                obj.insert("additionalProperties".into(), ap);
            }
        }

        // Keyword clean-up.
        if let Some(Value::Number(n)) = obj.get("exclusiveMinimum").cloned() {
            obj.insert("minimum".into(), Value::Number(n));
            obj.insert("exclusiveMinimum".into(), true.into());
        }
        if let Some(Value::Number(n)) = obj.get("exclusiveMaximum").cloned() {
            obj.insert("maximum".into(), Value::Number(n));
            obj.insert("exclusiveMaximum".into(), true.into());
        }
        if obj.remove("uniqueItems") == Some(Value::Bool(true)) {
            let scalar_items = obj
                .get("items")
                .and_then(type_of)
                .is_some_and(|t| !matches!(t, "object" | "array"));
            if scalar_items && !obj.contains_key("x-kubernetes-list-type") {
                obj.insert("x-kubernetes-list-type".into(), "set".into());
            }
        }
        if let Some(f) = obj.get("format").and_then(Value::as_str)
            && !KNOWN_FORMATS.contains(&f)
        {
            obj.remove("format");
        }
        if let Some(Value::Array(req)) = obj.get("required")
            && req.is_empty()
        {
            obj.remove("required");
        }
        obj.retain(|k, _| KEPT.contains(&k.as_str()) || k.starts_with("x-kubernetes-"));

        // Every node needs a type unless it is int-or-string or keeps unknown fields.
        if !obj.contains_key("type")
            && !truthy(&Value::Object(obj.clone()), "x-kubernetes-int-or-string")
            && !truthy(
                &Value::Object(obj.clone()),
                "x-kubernetes-preserve-unknown-fields",
            )
        {
            let inferred =
                if obj.contains_key("properties") || obj.contains_key("additionalProperties") {
                    Some("object")
                } else if obj.contains_key("items") {
                    Some("array")
                } else if let Some(Value::Array(values)) = obj.get("enum") {
                    common_type(values)
                } else {
                    None
                };
            match inferred {
                Some(t) => {
                    obj.insert("type".into(), t.into());
                }
                None if obj.contains_key("enum") => {
                    return Err(non_structural(
                        path,
                        "an enum whose values have different JSON types",
                    ));
                }
                None => {
                    obj.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
                }
            }
        }
        if nullable {
            obj.insert("nullable".into(), true.into());
        }
        Ok(Value::Object(obj))
    }

    fn reference(
        &mut self,
        reference: Value,
        siblings: Map<String, Value>,
        path: &str,
    ) -> Result<Value, SchemaError> {
        let text = reference.as_str().unwrap_or_default().to_owned();
        let name = text
            .rsplit_once('/')
            .map(|(_, n)| n.replace("~1", "/").replace("~0", "~"))
            .unwrap_or_default();
        let Some(def) = self.defs.get(&name) else {
            return Err(SchemaError::UnresolvedRef {
                path: display_path(path),
                reference: text,
            });
        };
        if self.stack.contains(&name) {
            return Err(SchemaError::Recursive {
                path: display_path(path),
                name,
            });
        }
        self.stack.push(name);
        let resolved = self.node(def.clone(), path);
        self.stack.pop();
        let mut resolved = match resolved? {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        if siblings.is_empty() {
            return Ok(Value::Object(resolved));
        }
        // Siblings (description, default, nullable...) override the target.
        let siblings = self.node(Value::Object(siblings), path)?;
        if let Value::Object(s) = siblings {
            for (k, v) in s {
                if k == "x-kubernetes-preserve-unknown-fields" && !resolved.is_empty() {
                    continue; // an empty sibling set inferred this; the target has its type
                }
                resolved.insert(k, v);
            }
        }
        Ok(Value::Object(resolved))
    }

    /// One schema for a value that matches any of `members` (serde enums).
    fn union(&mut self, members: Vec<Value>, path: &str) -> Result<Value, SchemaError> {
        let mut rewritten = Vec::with_capacity(members.len());
        for (i, m) in members.into_iter().enumerate() {
            rewritten.push(self.node(m, &format!("{path}.oneOf[{i}]"))?);
        }
        if rewritten.len() == 1 {
            return Ok(rewritten.remove(0));
        }
        let types: Vec<Option<&str>> = rewritten.iter().map(type_of).collect();
        let all = |t: &str| types.iter().all(|x| *x == Some(t));
        if rewritten
            .iter()
            .any(|m| truthy(m, "x-kubernetes-preserve-unknown-fields") && type_of(m).is_none())
        {
            return Ok(preserve_unknown());
        }
        if types
            .iter()
            .all(|t| matches!(t, Some("integer" | "string")))
            && types.contains(&Some("integer"))
            && types.contains(&Some("string"))
        {
            return Ok(json!({"x-kubernetes-int-or-string": true}));
        }
        if all("object") {
            return merge_objects(rewritten, true, path);
        }
        if let Some(Some(first)) = types.first() {
            if all(first) && *first != "array" {
                // Scalars of one type: unit variants, or untagged newtypes.
                let enums: Option<Vec<Value>> = rewritten
                    .iter()
                    .map(|m| m.get("enum").and_then(Value::as_array).cloned())
                    .collect::<Option<Vec<_>>>()
                    .map(|v| v.into_iter().flatten().collect());
                let mut out = Map::new();
                out.insert("type".into(), (*first).into());
                if let Some(values) = enums {
                    out.insert("enum".into(), Value::Array(dedup(values)));
                }
                return Ok(Value::Object(out));
            }
            if all(first) {
                let items: Vec<Value> = rewritten
                    .iter()
                    .map(|m| m.get("items").cloned().unwrap_or_else(preserve_unknown))
                    .collect();
                let items = if items.iter().all(|i| i == &items[0]) {
                    items[0].clone()
                } else {
                    self.union(items, &format!("{path}[*]"))?
                };
                return Ok(json!({"type": "array", "items": items}));
            }
        }
        // Unit variants (strings) beside struct, newtype or tuple variants
        // (objects: externally tagged), or an untagged string-or-object: a
        // structural schema has one type per node and may not name types
        // inside a junctor, so what accepts both is one untyped node the
        // API server stores as written (no server-side validation of it;
        // the typed decode still checks it).
        if types.iter().all(|t| matches!(t, Some("string" | "object"))) {
            return Ok(preserve_unknown());
        }
        let shown: Vec<&str> = types.iter().map(|t| t.unwrap_or("any")).collect();
        Err(non_structural(
            path,
            format!(
                "an enum whose variants serialize to different JSON types {shown:?} (for example a boolean and a string in an untagged enum); \
                 make every variant a struct variant, tag the enum internally (#[serde(tag = \"...\")]), or mark the field with #[schemars(schema_with = ...)] and x-kubernetes-preserve-unknown-fields"
            ),
        ))
    }
}

fn json_type(v: &Value) -> Option<&'static str> {
    match v {
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
        Value::Number(_) => Some("number"),
        Value::Object(_) => Some("object"),
        Value::Array(_) => Some("array"),
        Value::Null => None,
    }
}

fn common_type(values: &[Value]) -> Option<&'static str> {
    let mut types = values.iter().filter(|v| !v.is_null()).map(json_type);
    let first = types.next()??;
    types.all(|t| t == Some(first)).then_some(first)
}
