//! The Kubernetes CEL `url` library: `url(s)` and `isURL(s)`, and on a URL
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath` and
//! `getQuery`, with the API server's semantics.
//!
//! The API server accepts what Go's `url.ParseRequestURI` accepts: an
//! absolute URI (`scheme:...`) or an absolute path (`/...`), never a
//! relative reference; it then reads the parts with `url.Parse`, which
//! splits off a `#fragment`. [`Url::parse`] follows those parsers' rules:
//! the scheme (lower-cased), `?query`, the `//userinfo@host:port` authority
//! (a bracketed IPv6 literal, a numeric port, valid `%` escapes and host
//! characters), and the path, kept both decoded and as written for
//! `getEscapedPath`.

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The CEL type name of a URL.
const TYPE_NAME: &str = "kubernetes.URL";

/// A parsed URL, as Go's `url.URL` holds the parts this library reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Url {
    scheme: String,
    /// `host[:port]`, decoded, IPv6 literals in brackets.
    host: String,
    /// The decoded path.
    path: String,
    /// The path as written.
    raw_path: String,
    raw_query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Why a string is not a URL (Go's messages).
#[derive(Debug, thiserror::Error, PartialEq)]
pub(super) enum ParseError {
    /// An ASCII control character.
    #[error("net/url: invalid control character in URL")]
    Control,
    /// The empty string.
    #[error("empty url")]
    Empty,
    /// `:` before any scheme letter.
    #[error("missing protocol scheme")]
    MissingScheme,
    /// Neither an absolute URI nor an absolute path.
    #[error("invalid URI for request")]
    NotForRequest,
    /// A bad `%` escape.
    #[error("invalid URL escape {0:?}")]
    Escape(String),
    /// A character not allowed in a host.
    #[error("invalid character {0:?} in host name")]
    Host(String),
    /// A port that is not `:digits`.
    #[error("invalid port {0:?} after host")]
    Port(String),
    /// `[` without `]`.
    #[error("missing ']' in host")]
    Bracket,
    /// A character not allowed in userinfo.
    #[error("net/url: invalid userinfo")]
    Userinfo,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Path,
    Host,
    Query,
}

/// Go's `shouldEscape` for the modes used here.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'~') {
        return false;
    }
    if mode == Mode::Host
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            mode != Mode::Path || c == b'?'
        }
        _ => true,
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Go's `unescape`: decode `%XX` (and `+` in a query component).
fn unescape(s: &str, mode: Mode) -> Result<String, ParseError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(h), Some(l)) = (
                    b.get(i + 1).copied().and_then(hex),
                    b.get(i + 2).copied().and_then(hex),
                ) else {
                    let end = (i + 3).min(b.len());
                    return Err(ParseError::Escape(
                        String::from_utf8_lossy(&b[i..end]).into_owned(),
                    ));
                };
                // In a host only %25 and non-ASCII bytes may be escaped.
                if mode == Mode::Host && h < 8 && &b[i..i + 3] != b"%25" {
                    return Err(ParseError::Escape(s[i..i + 3].to_string()));
                }
                out.push(h * 16 + l);
                i += 3;
            }
            b'+' if mode == Mode::Query => {
                out.push(b' ');
                i += 1;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(ParseError::Host((c as char).to_string()));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape` in path mode.
fn escape_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, Mode::Path) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

/// Go's `validEncoded` in path mode: may `s` stand as the escaped path.
fn valid_encoded_path(s: &str) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path))
}

/// `""`, or `:` followed by digits only.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, ParseError> {
    if host.starts_with('[') {
        let end = host.rfind(']').ok_or(ParseError::Bracket)?;
        let colon_port = &host[end + 1..];
        if !valid_optional_port(colon_port) {
            return Err(ParseError::Port(colon_port.to_string()));
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(ParseError::Port(colon_port.to_string()));
        }
    }
    unescape(host, Mode::Host)
}

fn parse_authority(authority: &str) -> Result<String, ParseError> {
    let Some(at) = authority.rfind('@') else {
        return parse_host(authority);
    };
    let userinfo = &authority[..at];
    let valid = userinfo
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
    if !valid {
        return Err(ParseError::Userinfo);
    }
    unescape(userinfo, Mode::Query).map_err(|_| ParseError::Userinfo)?;
    parse_host(&authority[at + 1..])
}

/// Split off the scheme as Go's `getScheme` does.
fn split_scheme(raw: &str) -> Result<(&str, &str), ParseError> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            c if c.is_ascii_alphabetic() => {}
            c if c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.') => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' if i == 0 => return Err(ParseError::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

impl Url {
    /// Parse `raw` as the API server does: it must pass Go's
    /// `url.ParseRequestURI`, and is then read with `url.Parse`, which splits
    /// off a `#fragment` (and reads `//host` even without a scheme).
    pub(super) fn parse(raw: &str) -> Result<Url, ParseError> {
        Url::parse_go(raw, true)?;
        let without_fragment = raw.split_once('#').map_or(raw, |(before, _)| before);
        Url::parse_go(without_fragment, false)
    }

    /// Go's `url.parse`, as `ParseRequestURI` (`via_request`) or `Parse`
    /// (with the fragment already removed) call it.
    fn parse_go(raw: &str, via_request: bool) -> Result<Url, ParseError> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(ParseError::Control);
        }
        if raw.is_empty() && via_request {
            return Err(ParseError::Empty);
        }
        let mut url = Url {
            scheme: String::new(),
            host: String::new(),
            path: String::new(),
            raw_path: String::new(),
            raw_query: String::new(),
        };
        if raw == "*" && via_request {
            url.path = "*".into();
            url.raw_path = "*".into();
            return Ok(url);
        }
        let (scheme, rest) = split_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        let mut rest = rest;
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            rest = &rest[..rest.len() - 1];
        } else if let Some((before, query)) = rest.split_once('?') {
            url.raw_query = query.to_string();
            rest = before;
        }
        if !rest.starts_with('/') {
            if url.scheme.is_empty() && via_request {
                return Err(ParseError::NotForRequest);
            }
            // An opaque URI (`mailto:x`): no host and no path.
            return Ok(url);
        }
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
            && let Some(after) = rest.strip_prefix("//")
        {
            let (authority, path) = after
                .find('/')
                .map_or((after, ""), |i| (&after[..i], &after[i..]));
            url.host = parse_authority(authority)?;
            rest = path;
        }
        url.path = unescape(rest, Mode::Path)?;
        url.raw_path = rest.to_string();
        Ok(url)
    }

    /// `host` and `port` of `host[:port]`, brackets removed.
    fn split_host_port(&self) -> (&str, &str) {
        let mut host = self.host.as_str();
        let mut port = "";
        if let Some(i) = host.rfind(':')
            && valid_optional_port(&host[i..])
        {
            port = &host[i + 1..];
            host = &host[..i];
        }
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            host = inner;
        }
        (host, port)
    }

    fn escaped_path(&self) -> String {
        if self.path == "*" {
            return "*".into();
        }
        if valid_encoded_path(&self.raw_path) {
            return self.raw_path.clone();
        }
        escape_path(&self.path)
    }

    /// Go's `url.Query()`: malformed pairs are dropped.
    fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (unescape(k, Mode::Query), unescape(v, Mode::Query)) else {
                continue;
            };
            match out.iter_mut().find(|(key, _)| *key == k) {
                Some((_, values)) => values.push(v),
                None => out.push((k, vec![v])),
            }
        }
        out
    }
}

type Ret<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn bad(function: &str, what: &str) -> ExecutionError {
    ExecutionError::function_error(function, what)
}

fn out<'b, 'v>(v: Value) -> Ret<'b, 'v> {
    let boxed: Box<dyn cel::common::value::Val> = v.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn first(args: &[CowVal<'_, '_>]) -> Result<Value, ExecutionError> {
    let a = args
        .first()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    Value::try_from(a.as_ref())
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

fn url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let Value::String(s) = first(&args)? else {
        return Err(bad("url", "expected a string"));
    };
    let u = Url::parse(&s).map_err(|e| {
        bad(
            "url",
            &format!("URL parse error during conversion from string: {e}"),
        )
    })?;
    out(Value::Opaque(Arc::new(u)))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    let Value::String(s) = first(&args)? else {
        return Err(bad("isURL", "expected a string"));
    };
    out(Value::Bool(Url::parse(&s).is_ok()))
}

fn with_url<'b, 'v>(
    function: &str,
    args: &[CowVal<'b, 'v>],
    f: impl FnOnce(&Url) -> Value,
) -> Ret<'b, 'v> {
    match first(args)? {
        Value::Opaque(o) => match o.downcast_ref::<Url>() {
            Some(u) => out(f(u)),
            None => Err(bad(function, "expected a URL")),
        },
        _ => Err(bad(function, "expected a URL")),
    }
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getScheme", &args, |u| string(&u.scheme))
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getHost", &args, |u| string(&u.host))
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getHostname", &args, |u| string(u.split_host_port().0))
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getPort", &args, |u| string(u.split_host_port().1))
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getEscapedPath", &args, |u| string(&u.escaped_path()))
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    with_url("getQuery", &args, |u| {
        Value::from(
            u.query()
                .into_iter()
                .map(|(k, vs)| {
                    (
                        k,
                        Value::List(Arc::new(vs.iter().map(|v| string(v)).collect())),
                    )
                })
                .collect::<HashMap<String, Value>>(),
        )
    })
}

/// Register the URL type and its functions on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let t = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(t())?;
    env.add_overload("url", "k8s_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "k8s_is_url", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "k8s_url_get_scheme", t(), vec![], get_scheme)?;
    env.add_member_overload("getHost", "k8s_url_get_host", t(), vec![], get_host)?;
    env.add_member_overload(
        "getHostname",
        "k8s_url_get_hostname",
        t(),
        vec![],
        get_hostname,
    )?;
    env.add_member_overload("getPort", "k8s_url_get_port", t(), vec![], get_port)?;
    env.add_member_overload(
        "getEscapedPath",
        "k8s_url_get_escaped_path",
        t(),
        vec![],
        get_escaped_path,
    )?;
    env.add_member_overload("getQuery", "k8s_url_get_query", t(), vec![], get_query)?;
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

    #[test]
    fn parsing_follows_parse_request_uri() {
        for ok in [
            "https://example.com",
            "https://user:pw@example.com:8443/a/b?x=1",
            "https://[::1]:80/",
            "/absolute-path",
            "mailto:someone@example.com",
            "https://example.com/path with spaces/",
            "https://example.com:/",
            "*",
        ] {
            assert!(Url::parse(ok).is_ok(), "{ok}: {:?}", Url::parse(ok));
        }
        let cases = [
            ("", ParseError::Empty),
            ("../relative-path", ParseError::NotForRequest),
            ("example.com", ParseError::NotForRequest),
            (":foo", ParseError::MissingScheme),
            ("https://a\nb", ParseError::Control),
            ("https://example.com:8a/", ParseError::Port(":8a".into())),
            ("https://[::1/", ParseError::Bracket),
            ("https://exa mple.com/", ParseError::Host(" ".into())),
            ("/a%zz", ParseError::Escape("%zz".into())),
            ("https://a%41b.com/", ParseError::Escape("%41".into())),
            ("https://us er@example.com/", ParseError::Userinfo),
        ];
        for (raw, want) in cases {
            assert_eq!(Url::parse(raw), Err(want), "{raw}");
        }
    }

    #[test]
    fn every_function_in_cel() {
        let yes = [
            "url('HTTPS://example.com:80/').getScheme() == 'https'",
            "url('/absolute-path').getScheme() == '' && url('/absolute-path').getHost() == ''",
            "url('https://example.com:80/').getHost() == 'example.com:80'",
            "url('https://[::1]:80/').getHost() == '[::1]:80'",
            "url('https://example.com:80/').getHostname() == 'example.com'",
            "url('https://[::1]:80/').getHostname() == '::1' && url('https://[::1]/').getHostname() == '::1'",
            "url('https://example.com:80/').getPort() == '80' && url('https://example.com/').getPort() == ''",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/?k%26k=v+w&bad;=x&=e&z=%zz').getQuery() == {'k&k': ['v w'], '': ['e']}",
            "url('https://example.com').getQuery() == {}",
            "isURL('https://example.com:80/path?query=val#fragment') && !isURL('../relative-path') && !isURL('')",
            "isURL('/absolute-path') && !isURL('https://a:b:c/')",
            "url('https://user:pass@example.com:80/path?query=val#fragment').getQuery() == {'query': ['val']}",
            "url('https://example.com/p#frag').getEscapedPath() == '/p'",
            "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1' && url('https://[::1]/').getHost() == '[::1]'",
            "url('/path').getHost() == '' && url('/path').getHostname() == '' && url('/path').getPort() == ''",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {}",
            "url('//example.com/x').getHost() == 'example.com' && url('//example.com/x').getEscapedPath() == '/x'",
        ];
        for s in yes {
            assert_eq!(eval(s), Ok(Value::Bool(true)), "{s}");
        }
    }

    #[test]
    fn a_bad_url_is_an_error_not_an_answer() {
        let e = eval("url('../x').getScheme() == ''")
            .unwrap_err()
            .to_string();
        assert!(e.contains("URL parse error"), "{e}");
        assert!(eval("url('https://h:x/').getHost() != ''").is_err());
    }
}
