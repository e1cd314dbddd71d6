//! The zero-value rule on random objects: for objects of every listed kind
//! made at random from the Go facts (fields absent, `null`, Go zero values
//! or set), what the encoder writes (every non-pointer field, as Go's
//! marshallers do) decodes, typed and as JSON, to the object in the form
//! Go's `encoding/json` writes it (`facts::normalize_json`).

use crate::facts::{self, Elem, GoField, GoStruct, Shape};
use crate::{DecodeOptions, Decoder, Envelope};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// A small deterministic generator (splitmix64) driven by proptest's seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
}

/// Whether the generator writes this field at all: k8s-openapi knows it
/// and its JSON form is one of the element kinds made here.
fn generated(f: &GoField) -> bool {
    !f.rust.is_empty()
        && !matches!(
            f.elem,
            Elem::Json
                | Elem::SchemaOrArray
                | Elem::SchemaOrBool
                | Elem::SchemaOrStringArray
                | Elem::Unknown
                | Elem::Duration
        )
        // Lists of lists and maps of lists (rare; their shape is not one
        // layer).
        && !f.go_type.contains("][]")
        && !f.go_type.starts_with("[][")
}

fn zero(elem: Elem) -> Value {
    match elem {
        Elem::String => json!(""),
        Elem::Int => json!(0),
        Elem::Bool => json!(false),
        Elem::Float => json!(0.0),
        Elem::Quantity => json!("0"),
        Elem::IntOrString => json!(0),
        Elem::FieldsV1 | Elem::Struct(_) => json!({}),
        // A zero time or raw extension is `null` in Go's JSON.
        _ => Value::Null,
    }
}

fn value(elem: Elem, rng: &mut Rng, depth: u32) -> Value {
    match elem {
        Elem::String => json!(rng.pick(&["a", "x-1", "Always", ""])),
        Elem::Int => json!(rng.below(4)),
        Elem::Bool => json!(rng.below(2) == 1),
        Elem::Float => json!(1.5),
        Elem::Byte => json!("YQ=="),
        Elem::Time => json!("2024-05-06T07:08:09Z"),
        Elem::MicroTime => json!("2024-05-06T07:08:09.123456Z"),
        Elem::Quantity => json!(rng.pick(&["250m", "1Gi", "0"])),
        Elem::IntOrString => {
            if rng.below(2) == 0 {
                json!(rng.below(3))
            } else {
                json!("http")
            }
        }
        Elem::RawExtension => json!({"a": 1}),
        Elem::FieldsV1 => json!({"f:data": {}}),
        Elem::Struct(key) => match facts::go_struct(key) {
            Some(s) if depth < 6 => object(s, rng, depth + 1),
            _ => json!({}),
        },
        _ => Value::Null,
    }
}

fn field_value(f: &GoField, rng: &mut Rng, depth: u32, zeroed: bool) -> Value {
    match f.shape {
        Shape::Slice if f.elem == Elem::Byte => json!(if zeroed { "" } else { "YQ==" }),
        Shape::Slice if zeroed => json!([]),
        Shape::Slice => (0..1 + rng.below(2))
            .map(|_| value(f.elem, rng, depth))
            .collect(),
        Shape::Map if zeroed => json!({}),
        Shape::Map => (0..1 + rng.below(2))
            .map(|i| (format!("k{i}"), value(f.elem, rng, depth)))
            .collect::<Map<_, _>>()
            .into(),
        _ if zeroed => zero(f.elem),
        _ => value(f.elem, rng, depth),
    }
}

/// A random object of struct `s`.
fn object(s: &GoStruct, rng: &mut Rng, depth: u32) -> Value {
    let mut out = Map::new();
    let absent = 30 + 10 * u64::from(depth);
    for f in s.fields.iter().filter(|f| generated(f)) {
        // A time without omitempty is required by k8s-openapi: always set.
        let required_time = f.shape == Shape::Value
            && matches!(f.elem, Elem::Time | Elem::MicroTime)
            && !f.omitempty;
        let roll = if required_time { 99 } else { rng.below(100) };
        let v = match roll {
            r if r < absent => continue,
            r if r < absent + 8 && f.shape != Shape::Value => Value::Null,
            r if r < absent + 30 => field_value(f, rng, depth, true),
            _ => field_value(f, rng, depth, false),
        };
        out.insert(f.json.to_string(), v);
    }
    Value::Object(out)
}

/// One kind's check: `None` when the object does not fit the kind (try
/// another), else whether both decodings equal Go's JSON form.
type Check = fn(&Value) -> Option<Result<(), String>>;

fn check_as<K>(x: &Value) -> Option<Result<(), String>>
where
    K: k8s_openapi::Resource
        + serde::Serialize
        + serde::de::DeserializeOwned
        + PartialEq
        + std::fmt::Debug
        + 'static,
{
    let k: K = serde_json::from_value(x.clone()).ok()?;
    let x0 = serde_json::to_value(&k).ok()?;
    let decoder = Decoder::<K>::new()?;
    let mut go = x0.clone();
    facts::normalize_json(&mut go);
    let expect: K = match serde_json::from_value(go) {
        Ok(e) => e,
        Err(e) => return Some(Err(format!("normalized JSON does not fit: {e}"))),
    };
    let run = || -> Result<(), String> {
        let bytes = crate::to_protobuf(&x0).map_err(|e| e.to_string())?;
        let envelope = Envelope::read(&bytes).map_err(|e| e.to_string())?;
        let typed = decoder
            .decode(&envelope.raw, DecodeOptions::default())
            .map_err(|e| e.to_string())?;
        if typed != expect {
            return Err(format!(
                "typed decode differs\n  in:   {x0}\n  got:  {}\n  want: {}",
                serde_json::to_value(&typed).unwrap_or_default(),
                serde_json::to_value(&expect).unwrap_or_default()
            ));
        }
        let json = crate::from_protobuf(&bytes).map_err(|e| e.to_string())?;
        let want = serde_json::to_value(&expect).map_err(|e| e.to_string())?;
        if json != want {
            return Err(format!(
                "JSON decode differs\n  got:  {json}\n  want: {want}"
            ));
        }
        Ok(())
    };
    Some(run())
}

macro_rules! checks {
    (
        listed { $($av:literal $kind:literal => $($path:ident)::+;)* }
        other { $($other:tt)* }
    ) => {
        /// Every listed kind: its `apiVersion`, `kind` and check.
        fn checks() -> Vec<(&'static str, &'static str, Check)> {
            vec![$(($av, $kind, check_as::<k8s_openapi::$($path)::+> as Check),)*]
        }
    };
}

crate::kinds::builtin_kinds!(checks);

/// Checks one random object of each listed kind read in protobuf (trying
/// a few seeds until one fits the kind).
fn check_all(seed: u64) -> Result<usize, String> {
    let mut rng = Rng(seed);
    let mut checked = 0;
    for (av, kind, check) in checks() {
        let Some(s) = facts::go_kind(av, kind) else {
            return Err(format!("{av} {kind}: no Go facts"));
        };
        if !crate::has_protobuf(av, kind) {
            continue;
        }
        for _ in 0..8 {
            let mut x = object(s, &mut rng, 0);
            x["apiVersion"] = av.into();
            x["kind"] = kind.into();
            if let Some(r) = check(&x) {
                r.map_err(|e| format!("{av} {kind}: {e}"))?;
                checked += 1;
                break;
            }
        }
    }
    Ok(checked)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn go_style_protobuf_reads_as_go_json(seed in any::<u64>()) {
        let checked = check_all(seed).map_err(TestCaseError::fail)?;
        // Most kinds fit at the first try; every kind read in protobuf
        // is checked.
        let in_protobuf = checks().iter().filter(|(av, k, _)| crate::has_protobuf(av, k)).count();
        prop_assert!(checked + 2 >= in_protobuf, "{checked} of {in_protobuf} kinds checked");
    }
}
