//! The parts of the Kubernetes CEL libraries envtest adds to the `cel`
//! crate's environment: regex `find` / `findAll` on strings, and the list
//! library's `isSorted`, `sum`, `min`, `max`, `indexOf` and `lastIndexOf`.
//! Each works on plain values ([`cel::Value`]); a wrong argument is an
//! evaluation error, which refuses the object.

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::cmp::Ordering;
use std::sync::Arc;

type Ret<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn out<'b, 'v>(v: Value) -> Ret<'b, 'v> {
    let boxed: Box<dyn cel::common::value::Val> = v.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn bad(function: &str, what: &str) -> ExecutionError {
    ExecutionError::function_error(function, what)
}

fn regex(function: &str, v: &Value) -> Result<regex::Regex, ExecutionError> {
    match v {
        Value::String(re) => regex::Regex::new(re).map_err(|e| bad(function, &e.to_string())),
        _ => Err(bad(function, "the pattern must be a string")),
    }
}

fn text<'a>(function: &str, v: &'a Value) -> Result<&'a str, ExecutionError> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(bad(function, "the receiver must be a string")),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let (Some(s), Some(re)) = (a.first(), a.get(1)) else {
        return Err(ExecutionError::invalid_argument_count(2, a.len()));
    };
    let hit = regex("find", re)?
        .find(text("find", s)?)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    out(Value::String(Arc::new(hit)))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let (Some(s), Some(re)) = (a.first(), a.get(1)) else {
        return Err(ExecutionError::invalid_argument_count(2, a.len()));
    };
    let limit = match a.get(2) {
        Some(Value::Int(n)) if *n >= 0 => usize::try_from(*n).unwrap_or(usize::MAX),
        Some(_) => usize::MAX,
        None => usize::MAX,
    };
    let hits = regex("findAll", re)?
        .find_iter(text("findAll", s)?)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    out(Value::List(Arc::new(hits)))
}

fn list<'a>(function: &str, v: Option<&'a Value>) -> Result<&'a [Value], ExecutionError> {
    match v {
        Some(Value::List(l)) => Ok(l),
        _ => Err(bad(function, "the receiver must be a list")),
    }
}

/// Order two elements of one comparable type (int, uint, double, string).
fn order(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Ok(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Ok(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x
            .partial_cmp(y)
            .ok_or_else(|| bad(function, "NaN is not comparable")),
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        _ => Err(bad(function, "elements must be of one comparable type")),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let l = list("isSorted", a.first())?;
    for w in l.windows(2) {
        if order("isSorted", &w[0], &w[1])? == Ordering::Greater {
            return out(Value::Bool(false));
        }
    }
    out(Value::Bool(true))
}

fn extreme<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, want: Ordering) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let l = list(function, a.first())?;
    let mut best = l
        .first()
        .ok_or_else(|| bad(function, "the list is empty"))?;
    for x in &l[1..] {
        if order(function, x, best)? == want {
            best = x;
        }
    }
    out(best.clone())
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    extreme("min", args, Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    extreme("max", args, Ordering::Greater)
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let l = list("sum", a.first())?;
    let overflow = || bad("sum", "integer overflow");
    let total = match l.first() {
        None | Some(Value::Int(_)) => {
            let mut t: i64 = 0;
            for x in l {
                let Value::Int(i) = x else {
                    return Err(bad("sum", "elements must all be ints"));
                };
                t = t.checked_add(*i).ok_or_else(overflow)?;
            }
            Value::Int(t)
        }
        Some(Value::UInt(_)) => {
            let mut t: u64 = 0;
            for x in l {
                let Value::UInt(u) = x else {
                    return Err(bad("sum", "elements must all be uints"));
                };
                t = t.checked_add(*u).ok_or_else(overflow)?;
            }
            Value::UInt(t)
        }
        Some(Value::Float(_)) => {
            let mut t = 0.0;
            for x in l {
                let Value::Float(f) = x else {
                    return Err(bad("sum", "elements must all be doubles"));
                };
                t += f;
            }
            Value::Float(t)
        }
        Some(_) => return Err(bad("sum", "elements must be numbers")),
    };
    out(total)
}

fn position<'b, 'v>(args: Vec<CowVal<'b, 'v>>, last: bool) -> Ret<'b, 'v> {
    let a = values(&args)?;
    let l = list("indexOf", a.first())?;
    let needle = a
        .get(1)
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    let hit = if last {
        l.iter().rposition(|x| x == needle)
    } else {
        l.iter().position(|x| x == needle)
    };
    out(Value::Int(
        hit.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1),
    ))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    position(args, true)
}

/// Register the functions of this module on `env`.
/// The two lists of a `sets.*` call.
fn two_lists(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(Vec<Value>, Vec<Value>), ExecutionError> {
    let a = values(args)?;
    match (a.first(), a.get(1)) {
        (Some(Value::List(x)), Some(Value::List(y))) => Ok((x.to_vec(), y.to_vec())),
        (Some(_), Some(_)) => Err(bad(function, "both arguments must be lists")),
        _ => Err(ExecutionError::invalid_argument_count(2, a.len())),
    }
}

/// `sets.contains(a, b)`: every element of `b` is in `a`.
fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let (a, b) = two_lists("sets.contains", &args)?;
    out(Value::Bool(b.iter().all(|x| a.contains(x))))
}

/// `sets.equivalent(a, b)`: each list contains every element of the other.
fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let (a, b) = two_lists("sets.equivalent", &args)?;
    out(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}

/// `sets.intersects(a, b)`: the lists share an element.
fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let (a, b) = two_lists("sets.intersects", &args)?;
    out(Value::Bool(b.iter().any(|x| a.contains(x))))
}

pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    for (name, id, f) in [
        (
            "sets.contains",
            "k8s_sets_contains",
            sets_contains as cel::common::functions::Function,
        ),
        ("sets.equivalent", "k8s_sets_equivalent", sets_equivalent),
        ("sets.intersects", "k8s_sets_intersects", sets_intersects),
    ] {
        env.add_overload(name, id, vec![LIST_TYPE, LIST_TYPE], f)?;
    }
    env.add_member_overload(
        "find",
        "k8s_string_find",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "k8s_string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "k8s_string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "isSorted",
        "k8s_list_is_sorted",
        LIST_TYPE,
        vec![],
        is_sorted,
    )?;
    env.add_member_overload("sum", "k8s_list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "k8s_list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "k8s_list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "k8s_list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "k8s_list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}
