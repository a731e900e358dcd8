//! The corpus's value model (README section 1) and reply matchers (section 3), checked against decoded values.

use std::collections::HashMap;

use ruvio_client::Value;
use serde_json::Value as Json;

/// Saved integers of one run, by name, as decimal strings.
pub type Saved = HashMap<String, String>;

pub fn field<'a>(j: &'a Json, name: &str) -> Result<&'a Json, String> {
    j.get(name).ok_or_else(|| format!("corpus: missing field {name:?} in {j}"))
}

pub fn str_field<'a>(j: &'a Json, name: &str) -> Result<&'a str, String> {
    field(j, name)?.as_str().ok_or_else(|| format!("corpus: field {name:?} is not a string in {j}"))
}

pub fn int_field(j: &Json, name: &str) -> Result<i128, String> {
    let s = str_field(j, name)?;
    s.parse().map_err(|_| format!("corpus: field {name:?} = {s:?} is not a decimal integer"))
}

pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if s.len() & 1 == 1 {
        return Err(format!("corpus: odd-length hex {s:?}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("corpus: bad hex {s:?}")))
        .collect()
}

/// A short, readable rendering of a reply for failure details.
pub fn show(v: &Value) -> String {
    let text = |b: &[u8]| format!("{:?}", String::from_utf8_lossy(b));
    match v {
        Value::Simple(b) => format!("+{}", text(b)),
        Value::Error(b) => format!("-{}", text(b)),
        Value::Integer(i) => format!(":{i}"),
        Value::Bulk(b) => format!("${}", text(b)),
        Value::Nil => "nil".to_string(),
        Value::NilArray => "nil-array".to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Set(items) => format!("~[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Push(items) => format!(">[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Map(pairs) => {
            format!("{{{}}}", pairs.iter().map(|(k, v)| format!("{}: {}", show(k), show(v))).collect::<Vec<_>>().join(", "))
        }
        Value::Double(d) => format!(",{d}"),
        Value::Boolean(b) => format!("#{b}"),
        Value::Verbatim { format, text: t } => format!("={}:{}", String::from_utf8_lossy(format), text(t)),
        Value::BigNumber(b) => format!("({}", String::from_utf8_lossy(b)),
        other => format!("{other:?}"),
    }
}

fn expect_bytes(model: &Json) -> Result<Vec<u8>, String> {
    match (model.get("value").and_then(Json::as_str), model.get("hex").and_then(Json::as_str)) {
        (Some(s), None) => Ok(s.as_bytes().to_vec()),
        (None, Some(h)) => hex_decode(h),
        _ => Err(format!("corpus: {model} needs exactly one of value/hex")),
    }
}

fn parse_double(s: &str) -> Result<f64, String> {
    match s {
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| format!("corpus: bad double {s:?}")),
    }
}

fn items(model: &Json) -> Result<&Vec<Json>, String> {
    field(model, "items")?.as_array().ok_or_else(|| format!("corpus: items of {model} is not an array"))
}

fn seq(expected: &[Json], got: &[Value]) -> Result<(), String> {
    if expected.len() != got.len() {
        return Err(format!("{} items, expected {}", got.len(), expected.len()));
    }
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        model_eq(e, g).map_err(|why| format!("item {i}: {why}"))?;
    }
    Ok(())
}

/// `got` equals the model value `expected` (README section 1).
pub fn model_eq(expected: &Json, got: &Value) -> Result<(), String> {
    let ty = str_field(expected, "type")?;
    let mismatch = || Err(format!("got {}, expected {expected}", show(got)));
    match (ty, got) {
        ("nil", Value::Nil | Value::NilArray) => Ok(()),
        ("simple", Value::Simple(b)) if b.as_ref() == str_field(expected, "value")?.as_bytes() => Ok(()),
        ("error", Value::Error(b)) => {
            let text = str_field(expected, "text")?;
            if b.as_ref() != text.as_bytes() {
                return mismatch();
            }
            match expected.get("code").and_then(Json::as_str) {
                Some(code) if got.error_code() != Some(code) => Err(format!("error code {:?}, expected {code:?}", got.error_code())),
                _ => Ok(()),
            }
        }
        ("integer", Value::Integer(i)) if i128::from(*i) == int_field(expected, "value")? => Ok(()),
        ("bulk", Value::Bulk(b)) if b.as_ref() == expect_bytes(expected)?.as_slice() => Ok(()),
        ("array", Value::Array(g)) => seq(items(expected)?, g),
        ("set", Value::Set(g)) => seq(items(expected)?, g),
        ("push", Value::Push(g)) => seq(items(expected)?, g),
        ("map", Value::Map(g)) => {
            let entries = field(expected, "entries")?.as_array().ok_or("corpus: entries is not an array")?;
            if entries.len() != g.len() {
                return Err(format!("{} map entries, expected {}", g.len(), entries.len()));
            }
            for (i, (e, (k, v))) in entries.iter().zip(g).enumerate() {
                let pair = e.as_array().filter(|p| p.len() == 2).ok_or("corpus: a map entry is not a [key, value] pair")?;
                model_eq(&pair[0], k).map_err(|why| format!("entry {i} key: {why}"))?;
                model_eq(&pair[1], v).map_err(|why| format!("entry {i} value: {why}"))?;
            }
            Ok(())
        }
        ("double", Value::Double(d)) => {
            let want = parse_double(str_field(expected, "value")?)?;
            if (want.is_nan() && d.is_nan()) || want == *d {
                Ok(())
            } else {
                mismatch()
            }
        }
        ("boolean", Value::Boolean(b)) if Some(*b) == field(expected, "value")?.as_bool() => Ok(()),
        ("verbatim", Value::Verbatim { format, text })
            if format.as_slice() == str_field(expected, "format")?.as_bytes() && text.as_ref() == expect_bytes(expected)?.as_slice() =>
        {
            Ok(())
        }
        ("bignumber", Value::BigNumber(b)) if b.as_ref() == str_field(expected, "value")?.as_bytes() => Ok(()),
        (
            "nil" | "simple" | "error" | "integer" | "bulk" | "array" | "set" | "push" | "map" | "double" | "boolean" | "verbatim"
            | "bignumber",
            _,
        ) => mismatch(),
        (other, _) => Err(format!("corpus: unknown model type {other:?}")),
    }
}

fn integer(v: &Value) -> Result<i64, String> {
    match v {
        Value::Integer(i) => Ok(*i),
        other => Err(format!("got {}, expected an integer", show(other))),
    }
}

fn saved(saved: &Saved, name: &str) -> Result<i128, String> {
    let s = saved.get(name).ok_or_else(|| format!("corpus: nothing saved as {name:?}"))?;
    s.parse().map_err(|_| format!("saved {name:?} = {s:?} is not an integer"))
}

/// Field/value pairs of a RESP3 map or a RESP2 flat array, keys as text.
fn pairs(v: &Value) -> Result<Vec<(String, &Value)>, String> {
    let key = |k: &Value| match k {
        Value::Bulk(b) | Value::Simple(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        other => Err(format!("a field name is {}", show(other))),
    };
    match v {
        Value::Map(p) => p.iter().map(|(k, v)| Ok((key(k)?, v))).collect(),
        Value::Array(items) if items.len() % 2 == 0 => items.chunks(2).map(|c| Ok((key(&c[0])?, &c[1]))).collect(),
        other => Err(format!("got {}, expected a map or a flat array of pairs", show(other))),
    }
}

fn lockinfo(e: &Json, v: &Value, s: &Saved) -> Result<(), String> {
    let fields = pairs(v)?;
    let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    if names != ["kind", "limit", "holders", "waiters"] {
        return Err(format!("LOCKINFO fields {names:?}, expected [kind, limit, holders, waiters] in {}", show(v)));
    }
    let kind = str_field(e, "kind")?;
    if !matches!(fields[0].1, Value::Bulk(b) if b.as_ref() == kind.as_bytes()) {
        return Err(format!("kind {}, expected {kind:?}", show(fields[0].1)));
    }
    let limit = int_field(e, "limit")?;
    if i128::from(integer(fields[1].1)?) != limit {
        return Err(format!("limit {}, expected {limit}", show(fields[1].1)));
    }
    let waiters = int_field(e, "waiters")?;
    if i128::from(integer(fields[3].1)?) != waiters {
        return Err(format!("waiters {}, expected {waiters}", show(fields[3].1)));
    }
    let want = field(e, "holders")?.as_array().ok_or("corpus: holders is not an array")?;
    let Value::Array(holders) = fields[2].1 else { return Err(format!("holders {}, expected an array", show(fields[2].1))) };
    if holders.len() != want.len() {
        return Err(format!("{} holders, expected {} in {}", holders.len(), want.len(), show(v)));
    }
    for (i, (h, w)) in holders.iter().zip(want).enumerate() {
        let hf = pairs(h)?;
        let names: Vec<&str> = hf.iter().map(|(k, _)| k.as_str()).collect();
        if names != ["token", "remaining_ms"] {
            return Err(format!("holder {i} fields {names:?}, expected [token, remaining_ms]"));
        }
        let token = saved(s, str_field(w, "token")?)?;
        if i128::from(integer(hf[0].1)?) != token {
            return Err(format!("holder {i} token {}, expected {token} in {}", show(hf[0].1), show(v)));
        }
        let rem = i128::from(integer(hf[1].1)?);
        let (lo, hi) = (int_field(w, "remaining_ms_min")?, int_field(w, "remaining_ms_max")?);
        if rem < lo || rem > hi {
            return Err(format!("holder {i} remaining_ms {rem}, expected {lo}..={hi}"));
        }
    }
    Ok(())
}

/// Checks a reply against a step's `expect` (README section 3).
pub fn check(e: &Json, v: &Value, s: &Saved) -> Result<(), String> {
    let m = str_field(e, "match")?;
    let fail = |what: String| Err(format!("got {}, expected {what}", show(v)));
    match m {
        "int" => {
            let want = int_field(e, "value")?;
            if matches!(v, Value::Integer(i) if i128::from(*i) == want) {
                Ok(())
            } else {
                fail(format!("integer {want}"))
            }
        }
        "int_between" => {
            let (lo, hi) = (int_field(e, "min")?, int_field(e, "max")?);
            match v {
                Value::Integer(i) if (lo..=hi).contains(&i128::from(*i)) => Ok(()),
                _ => fail(format!("an integer in {lo}..={hi}")),
            }
        }
        "nil" => match v {
            Value::Nil | Value::NilArray => Ok(()),
            _ => fail("nil".to_string()),
        },
        "token" => match v {
            Value::Integer(i) if *i > 0 => Ok(()),
            _ => fail("a token (integer > 0)".to_string()),
        },
        "token_gt" => {
            let name = str_field(e, "than")?;
            let than = saved(s, name)?;
            match v {
                Value::Integer(i) if i128::from(*i) > than => Ok(()),
                _ => fail(format!("a token > {name} ({than})")),
            }
        }
        "token_eq" => {
            let name = str_field(e, "name")?;
            let want = saved(s, name)?;
            match v {
                Value::Integer(i) if i128::from(*i) == want => Ok(()),
                _ => fail(format!("the token {name} ({want})")),
            }
        }
        "simple" => {
            let want = str_field(e, "value")?;
            match v {
                Value::Simple(b) if b.as_ref() == want.as_bytes() => Ok(()),
                _ => fail(format!("+{want}")),
            }
        }
        "bulk" => {
            let want = str_field(e, "value")?;
            match v {
                Value::Bulk(b) if b.as_ref() == want.as_bytes() => Ok(()),
                _ => fail(format!("bulk {want:?}")),
            }
        }
        "error" => {
            let want = str_field(e, "text")?;
            match v {
                Value::Error(b) if b.as_ref() == want.as_bytes() => Ok(()),
                _ => fail(format!("error {want:?}")),
            }
        }
        "value" => model_eq(field(e, "value")?, v),
        "any" => match v {
            Value::Error(_) => fail("any non-error reply".to_string()),
            _ => Ok(()),
        },
        "lockinfo" => lockinfo(e, v, s),
        "dropped" => fail("a dropped connection (the server closed it)".to_string()),
        other => Err(format!("corpus: unknown matcher {other:?}")),
    }
}
