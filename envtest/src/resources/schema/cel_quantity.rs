//! The Kubernetes CEL `quantity` library: `quantity(s)` and `isQuantity(s)`,
//! and on a quantity `sign`, `isInteger`, `asInteger`, `asApproximateFloat`,
//! `add`, `sub` (a quantity or an int), `isGreaterThan`, `isLessThan` and
//! `compareTo`, with the API server's semantics.
//!
//! A quantity is parsed as the API server's `resource.ParseQuantity` does:
//! an optional sign, a decimal number, and a suffix that is a binary SI one
//! (`Ki` .. `Ei`), a decimal SI one (`n`, `u`, `m`, none, `k`, `M` .. `E`) or
//! a decimal exponent (`e3`, `E-2`); anything finer than `1n` is rounded up
//! (away from zero) to nanos. It is held exactly, as `mantissa × 10^exp`, so
//! `quantity('1Ki') == quantity('1024')` and `quantity('1.5') ==
//! quantity('1500m')`. envtest refuses (as an evaluation error) a quantity
//! with more than 38 significant digits, which the API server would hold in
//! an arbitrary-precision decimal.

use cel::common::functions::Function;
use cel::common::types::{INT_TYPE, STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::cmp::Ordering;
use std::sync::Arc;

/// The CEL type name of a quantity.
const TYPE_NAME: &str = "kubernetes.Quantity";

/// An exact decimal quantity, `mantissa × 10^exp`, normalised (no trailing
/// zero in the mantissa; zero is `0 × 10^0`) so equal values are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Quantity {
    mantissa: i128,
    exp: i32,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Why a string is not a quantity.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(super) enum ParseError {
    /// Not of the form `<sign><number><suffix>`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The suffix is not one the API server knows.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Too many digits or too large an exponent for envtest's exact decimal.
    #[error("quantity is out of the range envtest can represent exactly")]
    Range,
}

const MAX_DIGITS: u32 = 38;

fn digits(m: i128) -> u32 {
    m.unsigned_abs().checked_ilog10().map_or(0, |d| d + 1)
}

impl Quantity {
    fn new(mantissa: i128, exp: i32) -> Result<Quantity, ParseError> {
        let (mut m, mut e) = (mantissa, exp);
        if m == 0 {
            return Ok(Quantity {
                mantissa: 0,
                exp: 0,
            });
        }
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        if digits(m) > MAX_DIGITS || !(-1000..=1000).contains(&e) {
            return Err(ParseError::Range);
        }
        Ok(Quantity {
            mantissa: m,
            exp: e,
        })
    }

    /// Parse `s` as `resource.ParseQuantity` does.
    pub(super) fn parse(s: &str) -> Result<Quantity, ParseError> {
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        // The suffix is `[eEinumkKMGTP]*[-+]?[0-9]*`, else the format is
        // wrong; only then is it looked up.
        let letters = suffix
            .find(|c: char| !"eEinumkKMGTP".contains(c))
            .unwrap_or(suffix.len());
        let tail = &suffix[letters..];
        let tail = tail.strip_prefix(['+', '-']).unwrap_or(tail);
        if !tail.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ParseError::Format);
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(ParseError::Format);
        }
        let mut mantissa: i128 = 0;
        let mut significant = 0u32;
        for d in whole.bytes().chain(fraction.bytes()) {
            if mantissa != 0 || d != b'0' {
                significant += 1;
            }
            if significant > MAX_DIGITS {
                return Err(ParseError::Range);
            }
            mantissa = mantissa * 10 + i128::from(d - b'0');
        }
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| ParseError::Range)?;
        let (mut exp, binary) = suffix_scale(suffix)?;
        exp -= fraction_len;
        if binary > 0 {
            let factor = 1i128 << binary;
            mantissa = mantissa.checked_mul(factor).ok_or(ParseError::Range)?;
        }
        // Round up to nanos, away from zero, as the API server does.
        if exp < -9 {
            let shift = u32::try_from(-9 - exp).map_err(|_| ParseError::Range)?;
            let div = 10i128.checked_pow(shift);
            mantissa = match div {
                Some(div) => mantissa / div + i128::from(mantissa % div != 0),
                None => i128::from(mantissa != 0),
            };
            exp = -9;
        }
        if negative {
            mantissa = -mantissa;
        }
        Quantity::new(mantissa, exp)
    }

    /// -1, 0 or 1.
    fn sign(self) -> i64 {
        i64::from(self.mantissa.signum() as i8)
    }

    /// The value as an int64, if it is one exactly.
    fn as_i64(self) -> Option<i64> {
        if self.exp < 0 {
            return None;
        }
        let scale = 10i128.checked_pow(u32::try_from(self.exp).ok()?)?;
        i64::try_from(self.mantissa.checked_mul(scale)?).ok()
    }

    fn as_f64(self) -> f64 {
        // Exact mantissa, then one scaling: the API server's approximation.
        (self.mantissa as f64) * 10f64.powi(self.exp)
    }

    /// Both mantissas at the smaller exponent, if that fits.
    fn aligned(self, other: Quantity) -> Option<(i128, i128, i32)> {
        let exp = self.exp.min(other.exp);
        let up = |q: Quantity| {
            let shift = u32::try_from(q.exp - exp).ok()?;
            q.mantissa.checked_mul(10i128.checked_pow(shift)?)
        };
        Some((up(self)?, up(other)?, exp))
    }

    fn compare(self, other: Quantity) -> Ordering {
        let by_sign = self.mantissa.signum().cmp(&other.mantissa.signum());
        if by_sign != Ordering::Equal || self.mantissa == 0 {
            return by_sign;
        }
        // Same sign, both non-zero: the position of the leading digit decides
        // unless equal, and then the aligned mantissas fit.
        let lead = |q: Quantity| i64::from(digits(q.mantissa)) + i64::from(q.exp);
        let magnitude = match lead(self).cmp(&lead(other)) {
            Ordering::Equal => match self.aligned(other) {
                Some((a, b, _)) => a.unsigned_abs().cmp(&b.unsigned_abs()),
                None => Ordering::Equal,
            },
            o => o,
        };
        if self.mantissa < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    fn add(self, other: Quantity) -> Result<Quantity, ExecutionError> {
        let too_big = || {
            bad(
                "add",
                "the result is out of the range envtest can represent",
            )
        };
        let (a, b, exp) = self.aligned(other).ok_or_else(too_big)?;
        Quantity::new(a.checked_add(b).ok_or_else(too_big)?, exp).map_err(|_| too_big())
    }
}

/// The decimal exponent and binary shift a suffix stands for.
fn suffix_scale(suffix: &str) -> Result<(i32, u32), ParseError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s => {
            let Some(e) = s.strip_prefix('e').or_else(|| s.strip_prefix('E')) else {
                return Err(ParseError::Suffix);
            };
            let body = e.strip_prefix(['+', '-']).unwrap_or(e);
            if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ParseError::Suffix);
            }
            (e.parse::<i32>().map_err(|_| ParseError::Range)?, 0)
        }
    })
}

type Ret<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn bad(function: &str, what: &str) -> ExecutionError {
    ExecutionError::function_error(function, what)
}

fn out<'b, 'v>(v: Value) -> Ret<'b, 'v> {
    let boxed: Box<dyn cel::common::value::Val> = v.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn quantity_of(function: &str, v: Option<&Value>) -> Result<Quantity, ExecutionError> {
    match v {
        Some(Value::Opaque(o)) => o
            .downcast_ref::<Quantity>()
            .copied()
            .ok_or_else(|| bad(function, "expected a quantity")),
        _ => Err(bad(function, "expected a quantity")),
    }
}

fn string_of<'a>(function: &str, v: Option<&'a Value>) -> Result<&'a str, ExecutionError> {
    match v {
        Some(Value::String(s)) => Ok(s),
        _ => Err(bad(function, "expected a string")),
    }
}

fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let q = Quantity::parse(string_of("quantity", a.first())?)
        .map_err(|e| bad("quantity", &e.to_string()))?;
    out(Value::Opaque(Arc::new(q)))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let s = string_of("isQuantity", a.first())?;
    out(Value::Bool(Quantity::parse(s).is_ok()))
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    out(Value::Int(quantity_of("sign", a.first())?.sign()))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    out(Value::Bool(
        quantity_of("isInteger", a.first())?.as_i64().is_some(),
    ))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let q = quantity_of("asInteger", a.first())?;
    let i = q
        .as_i64()
        .ok_or_else(|| bad("asInteger", "cannot convert value to integer"))?;
    out(Value::Int(i))
}

fn as_approximate_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    out(Value::Float(
        quantity_of("asApproximateFloat", a.first())?.as_f64(),
    ))
}

/// The right operand of `add`/`sub`: a quantity, or an int taken as one.
fn operand(function: &str, v: Option<&Value>) -> Result<Quantity, ExecutionError> {
    match v {
        Some(Value::Int(i)) => {
            Quantity::new(i128::from(*i), 0).map_err(|e| bad(function, &e.to_string()))
        }
        other => quantity_of(function, other),
    }
}

fn arith<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, negate: bool) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let lhs = quantity_of(function, a.first())?;
    let mut rhs = operand(function, a.get(1))?;
    if negate {
        rhs.mantissa = -rhs.mantissa;
    }
    out(Value::Opaque(Arc::new(lhs.add(rhs)?)))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    arith("add", args, false)
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    arith("sub", args, true)
}

fn ordering(function: &str, args: &[CowVal<'_, '_>]) -> Result<Ordering, ExecutionError> {
    let a = values(args)?;
    Ok(quantity_of(function, a.first())?.compare(quantity_of(function, a.get(1))?))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    out(Value::Bool(
        ordering("isGreaterThan", &args)? == Ordering::Greater,
    ))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    out(Value::Bool(
        ordering("isLessThan", &args)? == Ordering::Less,
    ))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let o = ordering("compareTo", &args)?;
    out(Value::Int(o as i64))
}

/// Register the quantity type and its functions on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(q())?;
    env.add_overload("quantity", "k8s_quantity", vec![STRING_TYPE], quantity)?;
    // The API server declares `sign` as a global function of a quantity and
    // documents it as a method: both forms are accepted.
    env.add_overload("sign", "k8s_quantity_sign_global", vec![q()], sign)?;
    env.add_overload(
        "isQuantity",
        "k8s_is_quantity",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    let members: [(&str, &str, Vec<Type>, Function); 11] = [
        ("sign", "k8s_quantity_sign", vec![], sign),
        ("isInteger", "k8s_quantity_is_integer", vec![], is_integer),
        ("asInteger", "k8s_quantity_as_integer", vec![], as_integer),
        (
            "asApproximateFloat",
            "k8s_quantity_as_approximate_float",
            vec![],
            as_approximate_float,
        ),
        ("add", "k8s_quantity_add", vec![q()], add),
        ("add", "k8s_quantity_add_int", vec![INT_TYPE], add),
        ("sub", "k8s_quantity_sub", vec![q()], sub),
        ("sub", "k8s_quantity_sub_int", vec![INT_TYPE], sub),
        (
            "isGreaterThan",
            "k8s_quantity_is_greater_than",
            vec![q()],
            is_greater_than,
        ),
        (
            "isLessThan",
            "k8s_quantity_is_less_than",
            vec![q()],
            is_less_than,
        ),
        (
            "compareTo",
            "k8s_quantity_compare_to",
            vec![q()],
            compare_to,
        ),
    ];
    for (name, id, args, f) in members {
        env.add_member_overload(name, id, q(), args, f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard library with this extension (and the strings one), not
    /// `cel_library::ENV`: the library imports this module, so its tests
    /// must not import the library back.
    static ENV: std::sync::LazyLock<std::sync::Arc<cel::Env>> = std::sync::LazyLock::new(|| {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings).unwrap();
        env.add_extension(extension).unwrap();
        std::sync::Arc::new(env)
    });

    fn eval(src: &str) -> Result<Value, ExecutionError> {
        let ctx = cel::Context::with_env(ENV.clone());
        ENV.compile(src).unwrap().execute(&ctx)
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parsing_follows_the_api_servers_suffixes_and_rounding() {
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1.5"), q("1500m"));
        assert_eq!(q("1.5Gi"), q("1536Mi"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1E3"), q("1k"));
        assert_eq!(q("1E"), q("1000P"));
        assert_eq!(q("2E-3"), q("2m"));
        assert_eq!(q("+.5"), q("500m"));
        assert_eq!(q("5."), q("5"));
        assert_eq!(q("-0"), q("0"));
        // Finer than nanos rounds up, away from zero.
        assert_eq!(q("0.1n"), q("1n"));
        assert_eq!(q("-0.1n"), q("-1n"));
        assert_eq!(q("1.0000000001"), q("1000000001n"));
        for bad in [
            "", "abc", "1K", "1 Gi", "1Gi ", "1..2", ".", "-", "1e", "1e+", "1ki", "Gi", "1.5.5",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(Quantity::parse("1K"), Err(ParseError::Suffix));
        assert_eq!(Quantity::parse(&"9".repeat(40)), Err(ParseError::Range));
    }

    #[test]
    fn comparison_is_by_value() {
        assert_eq!(q("1Gi").compare(q("1G")), Ordering::Greater);
        assert_eq!(q("999m").compare(q("1")), Ordering::Less);
        assert_eq!(q("-2").compare(q("-1")), Ordering::Less);
        assert_eq!(q("-1").compare(q("1n")), Ordering::Less);
        assert_eq!(q("0").compare(q("-0")), Ordering::Equal);
        assert_eq!(q("1e30").compare(q("1e-9")), Ordering::Greater);
    }

    #[test]
    fn every_function_in_cel() {
        let yes = [
            "quantity('1Gi').isGreaterThan(quantity('1G'))",
            "quantity('500Mi').isLessThan(quantity('1Gi'))",
            "!quantity('1Gi').isLessThan(quantity('1024Mi'))",
            "quantity('1Gi') == quantity('1024Mi')",
            "quantity('1') != quantity('2')",
            "quantity('1k').compareTo(quantity('1000')) == 0",
            "quantity('1').compareTo(quantity('2')) == -1 && quantity('3').compareTo(quantity('2')) == 1",
            "isQuantity('250m') && !isQuantity('1.5X') && !isQuantity('')",
            "quantity('-5').sign() == -1 && quantity('0').sign() == 0 && quantity('1n').sign() == 1",
            "quantity('1k').isInteger() && !quantity('1500m').isInteger() && !quantity('10E').isInteger()",
            "sign(quantity('-1Ki')) == -1",
            "quantity('50000000G').isInteger() && !quantity('9999999999999999999999999999999999999G').isInteger()",
            "quantity('200M').compareTo(quantity('0.2G')) == 0 && quantity('50M').compareTo(quantity('50Mi')) == -1",
            "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
            "quantity('2Ki').asInteger() == 2048",
            "quantity('1500m').asApproximateFloat() == 1.5",
            "quantity('1').add(quantity('500m')) == quantity('1.5')",
            "quantity('1Ki').add(1) == quantity('1025')",
            "quantity('1').sub(quantity('500m')) == quantity('500m')",
            "quantity('1').sub(2).sign() == -1",
        ];
        for s in yes {
            assert_eq!(eval(s), Ok(Value::Bool(true)), "{s}");
        }
    }

    #[test]
    fn errors_refuse_instead_of_answering() {
        for s in [
            "quantity('1.5X') == quantity('1')",
            "quantity('1500m').asInteger() == 1",
            "quantity('10E').asInteger() > 0",
        ] {
            assert!(eval(s).is_err(), "{s} did not fail: {:?}", eval(s));
        }
        let e = eval("quantity('12 G').sign() == 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("quantities must match"), "{e}");
    }

    /// A random quantity string and its exact value in nanos.
    fn quantity_and_nanos() -> impl proptest::strategy::Strategy<Value = (String, i128)> {
        use proptest::prelude::*;
        const SUFFIXES: [(&str, i128); 17] = [
            ("n", 1),
            ("u", 1_000),
            ("m", 1_000_000),
            ("", 1_000_000_000),
            ("k", 1_000_000_000_000),
            ("M", 1_000_000_000_000_000),
            ("G", 1_000_000_000_000_000_000),
            ("T", 1_000_000_000_000_000_000_000),
            ("e2", 100_000_000_000),
            ("E-3", 1_000_000),
            ("Ki", 1_000_000_000 << 10),
            ("Mi", 1_000_000_000 << 20),
            ("Gi", 1_000_000_000 << 30),
            ("Ti", 1_000_000_000 << 40),
            ("Pi", 1_000_000_000 << 50),
            ("Ei", 1_000_000_000 << 60),
            ("P", 1_000_000_000_000_000_000_000_000),
        ];
        (-1_000_000i64..1_000_000, 0..SUFFIXES.len()).prop_map(|(n, i)| {
            (
                format!("{n}{}", SUFFIXES[i].0),
                i128::from(n) * SUFFIXES[i].1,
            )
        })
    }

    proptest::proptest! {
        /// Order, equality and sums agree with exact integer arithmetic.
        #[test]
        fn quantities_behave_as_their_exact_values(
            (a, na) in quantity_and_nanos(),
            (b, nb) in quantity_and_nanos(),
        ) {
            let (qa, qb) = (q(&a), q(&b));
            proptest::prop_assert_eq!(qa.compare(qb), na.cmp(&nb));
            proptest::prop_assert_eq!(qa == qb, na == nb);
            proptest::prop_assert_eq!(qa.add(qb).unwrap(), Quantity::new(na + nb, -9).unwrap());
            proptest::prop_assert_eq!(qa.as_i64().is_some(), na % 1_000_000_000 == 0 && i64::try_from(na / 1_000_000_000).is_ok());
        }
    }
}
