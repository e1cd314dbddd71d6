//! RBAC for service-account clients: authentication by token and
//! authorization by the `Role`s, `ClusterRole`s and their bindings stored in
//! this server, as a real API server's RBAC authorizer does.
//!
//! Only identities made with [`crate::TestEnv::service_account_client`] are
//! checked; the admin client stays unrestricted, so a test sets up roles and
//! fixtures with it and runs the code under test with the restricted one.
//! A request is resolved into attributes first (verb, API group, resource,
//! subresource, namespace, name), exactly as Kubernetes' request-info
//! resolver does, then allowed when some binding of the user grants a rule
//! matching them; otherwise it gets 403 Forbidden with the message a real
//! server writes, e.g. `pods "web" is forbidden: User
//! "system:serviceaccount:default:ctl" cannot get resource "pods" in API
//! group "" in the namespace "default"`. Discovery and other non-resource
//! reads are allowed to every authenticated user (the default
//! `system:discovery` role).

use crate::error::ApiError;
use crate::storage::Store;
use http::{HeaderMap, Method, header};
use parking_lot::RwLock;
use serde_json::Value;
use std::collections::HashMap;

/// Where the RBAC kinds are stored.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:NS:NAME`).
    pub name: String,
    /// Groups the user belongs to.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The identity of service account `namespace/name`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        UserInfo {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// The identity of every request RBAC is not enforced on: the default
    /// client, and the `--token` user (`system:masters`, as Go envtest's
    /// admin user).
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN.into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
}

/// The user name of [`UserInfo::admin`].
pub const ADMIN: &str = "envtest-admin";

/// The tokens this server knows, and whose they are.
#[derive(Debug, Default)]
pub struct Authz {
    tokens: RwLock<HashMap<String, UserInfo>>,
}

/// What a request asks to do, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; for non-resource requests the lower-case method.
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The resource plural; empty for a non-resource request.
    pub resource: String,
    /// The subresource (`status`, `scale`...), or empty.
    pub subresource: String,
    /// The namespace, or empty.
    pub namespace: String,
    /// The object name, or empty.
    pub name: String,
    /// The URL path.
    pub path: String,
}

impl Attributes {
    /// Resolve a request the way Kubernetes' request-info resolver does.
    pub fn resolve(method: &Method, path: &str, query: &str) -> Attributes {
        let mut a = Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: path.to_string(),
        };
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut rest: &[&str] = match segs.as_slice() {
            ["api", _v, rest @ ..] => rest,
            ["apis", g, _v, rest @ ..] => {
                a.group = (*g).to_string();
                rest
            }
            _ => return a,
        };
        if rest.is_empty() {
            return a;
        }
        let mut watch = query
            .split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1"));
        if rest[0] == "watch" {
            watch = true;
            rest = &rest[1..];
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            a.namespace = rest[1].to_string();
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        let Some((resource, tail)) = rest.split_first() else {
            return a;
        };
        a.resource = (*resource).to_string();
        if let Some(name) = tail.first() {
            a.name = (*name).to_string();
        }
        if let Some(sub) = tail.get(1) {
            a.subresource = (*sub).to_string();
        }
        let named = !a.name.is_empty();
        if !named && tail.is_empty() {
            // As kube-apiserver's request-info resolver: a list or watch
            // selecting one name by field is authorized against that name.
            if let Some(name) = selected_name(query) {
                a.name = name;
            }
        }
        a.verb = match (method, named) {
            (&Method::GET | &Method::HEAD, _) if watch => "watch",
            (&Method::GET | &Method::HEAD, true) => "get",
            (&Method::GET | &Method::HEAD, false) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => return a,
        }
        .to_string();
        a
    }

    /// Whether the request names a resource (not `/version`, `/apis`...).
    pub fn is_resource_request(&self) -> bool {
        !self.resource.is_empty()
    }

    /// The 403 a real server answers when these attributes are denied.
    pub fn forbidden(&self, user: &UserInfo) -> ApiError {
        let who = &user.name;
        if !self.is_resource_request() {
            return ApiError::new(
                403,
                "Forbidden",
                format!(
                    "forbidden: User {who:?} cannot {} path {:?}",
                    self.verb, self.path
                ),
            );
        }
        let mut resource = self.resource.clone();
        if !self.subresource.is_empty() {
            resource = format!("{resource}/{}", self.subresource);
        }
        let why = if self.namespace.is_empty() {
            format!(
                "User {who:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
                self.verb, self.group
            )
        } else {
            format!(
                "User {who:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
                self.verb, self.group, self.namespace
            )
        };
        let qualified = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        let message = if self.name.is_empty() {
            format!("{qualified} is forbidden: {why}")
        } else {
            format!("{qualified} {:?} is forbidden: {why}", self.name)
        };
        ApiError::new(403, "Forbidden", message).with_details(
            &self.group,
            &self.resource,
            &self.name,
        )
    }
}

impl Authz {
    /// Register `token` as `user`.
    pub fn add_token(&self, token: String, user: UserInfo) {
        self.tokens.write().insert(token, user);
    }

    /// Whether `user` may do what `attrs` describe: a rule of some binding
    /// of theirs matches, or (for non-resource paths) it is a read.
    pub fn allows(&self, store: &Store, user: &UserInfo, attrs: &Attributes) -> bool {
        if !attrs.is_resource_request() {
            // system:discovery and system:public-info-viewer: reads only.
            return matches!(attrs.verb.as_str(), "get" | "head");
        }
        rules_for(store, user, &attrs.namespace)
            .iter()
            .any(|rule| rule_allows(rule, attrs))
    }

    /// The user a request acts as, when RBAC applies to it: the owner of
    /// its service-account token, else the user its `Impersonate-User`
    /// header names (the request is the admin's, who may impersonate).
    pub fn identify(&self, headers: &HeaderMap) -> Option<UserInfo> {
        self.token_user(headers).or_else(|| impersonated(headers))
    }

    /// The user whose token the request carries, if it is one of ours.
    pub fn token_user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        self.user(bearer_token(headers)?)
    }

    /// The user `token` belongs to, if it is one of ours.
    pub fn user(&self, token: &str) -> Option<UserInfo> {
        self.tokens.read().get(token).cloned()
    }

    /// Allow or deny a request of `user`.
    pub fn authorize(
        &self,
        store: &Store,
        user: &UserInfo,
        method: &Method,
        path: &str,
        query: &str,
    ) -> Result<(), ApiError> {
        let attrs = Attributes::resolve(method, path, query);
        if self.allows(store, user, &attrs) {
            Ok(())
        } else {
            Err(attrs.forbidden(user))
        }
    }
}

/// The header that names the user a request impersonates.
pub const IMPERSONATE_USER: &str = "impersonate-user";

/// The user of an `Impersonate-User` header, with the groups of the
/// `Impersonate-Group` headers; a service account's name
/// (`system:serviceaccount:NS:NAME`) gets its groups, as a real API
/// server gives them.
fn impersonated(headers: &HeaderMap) -> Option<UserInfo> {
    let name = headers.get(IMPERSONATE_USER)?.to_str().ok()?.trim();
    if let Some((ns, sa)) = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        return Some(UserInfo::service_account(ns, sa));
    }
    let mut groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    groups.push("system:authenticated".into());
    Some(UserInfo {
        name: name.into(),
        groups,
    })
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is
/// matched without regard to case (RFC 9110 section 11.1), as Kubernetes'
/// token authenticator does, so `bearer x` works too.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn strings<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Whether a binding's subject list names `user`; `binding_ns` is where a
/// RoleBinding lives (a ServiceAccount subject without a namespace means it).
fn binds(binding: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| {
            let name = str_at(s, "/name");
            match str_at(s, "/kind") {
                "User" => user.name == name,
                "Group" => user.groups.iter().any(|g| g == name),
                "ServiceAccount" => {
                    let ns = match str_at(s, "/namespace") {
                        "" => binding_ns,
                        ns => ns,
                    };
                    user.name == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

/// What every authenticated user may do whatever is stored, as a cluster's
/// `system:basic-user` ClusterRole (bound to `system:authenticated`) grants:
/// ask what they may do, and who they are.
fn basic_user_rules() -> Vec<Value> {
    vec![
        serde_json::json!({"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}),
        serde_json::json!({"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}),
    ]
}

/// Every rule granted to `user` that applies in `namespace` (cluster-wide
/// bindings everywhere, RoleBindings only in their own namespace), the
/// `system:basic-user` rules first.
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let key = |plural: &str| format!("{RBAC_GROUP}/{plural}");
    store.txn(|txn| {
        let role_rules = |plural: &str, ns: &str, name: &str| -> Vec<Value> {
            txn.get(&key(plural), &(ns.to_string(), name.to_string()))
                .and_then(|o| o.value.get("rules").and_then(Value::as_array).cloned())
                .unwrap_or_default()
        };
        let mut out = basic_user_rules();
        for (_, crb) in txn.list(&key("clusterrolebindings"), None) {
            if binds(&crb.value, user, "") && str_at(&crb.value, "/roleRef/kind") == "ClusterRole" {
                out.extend(role_rules(
                    "clusterroles",
                    "",
                    str_at(&crb.value, "/roleRef/name"),
                ));
            }
        }
        if !namespace.is_empty() {
            for (_, rb) in txn.list(&key("rolebindings"), Some(namespace)) {
                if !binds(&rb.value, user, namespace) {
                    continue;
                }
                let role = str_at(&rb.value, "/roleRef/name");
                match str_at(&rb.value, "/roleRef/kind") {
                    "ClusterRole" => out.extend(role_rules("clusterroles", "", role)),
                    "Role" => out.extend(role_rules("roles", namespace, role)),
                    _ => {}
                }
            }
        }
        out
    })
}

/// The name a `fieldSelector=metadata.name=<name>` query selects.
fn selected_name(query: &str) -> Option<String> {
    let selector = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("fieldSelector="))?
        .replace("%3D", "=")
        .replace("%3d", "=")
        .replace("%2C", ",")
        .replace("%2c", ",");
    selector.split(',').find_map(|term| {
        let name = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!name.is_empty()).then(|| name.to_owned())
    })
}

/// Whether one `PolicyRule` (as stored JSON) allows the request.
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let verb_ok = strings(rule, "verbs").any(|v| v == "*" || v == a.verb);
    let group_ok = strings(rule, "apiGroups").any(|g| g == "*" || g == a.group);
    let wanted = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_ok = strings(rule, "resources").any(|r| {
        r == "*"
            || r == wanted
            || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource.as_str()))
    });
    let mut names = strings(rule, "resourceNames").peekable();
    let name_ok = names.peek().is_none() || (!a.name.is_empty() && names.any(|n| n == a.name));
    verb_ok && group_ok && resource_ok && name_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(method: Method, path: &str, query: &str) -> Attributes {
        Attributes::resolve(&method, path, query)
    }

    #[test]
    fn resolves_verbs_scopes_and_subresources() {
        let a = attrs(Method::GET, "/api/v1/namespaces/default/pods", "");
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", "default"));
        let a = attrs(Method::GET, "/api/v1/pods", "watch=true");
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = attrs(Method::GET, "/api/v1/watch/namespaces/ns/pods/p", "");
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        let a = attrs(
            Method::GET,
            "/api/v1/namespaces/ns/secrets",
            "watch=true&fieldSelector=metadata.name%3Dcert",
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "cert"));
        let a = attrs(
            Method::PUT,
            "/apis/example.com/v1/namespaces/ns/foos/f/status",
            "",
        );
        assert_eq!(
            (a.verb.as_str(), a.group.as_str(), a.resource.as_str()),
            ("update", "example.com", "foos")
        );
        assert_eq!((a.name.as_str(), a.subresource.as_str()), ("f", "status"));
        let a = attrs(
            Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
            "",
        );
        assert_eq!(a.verb, "deletecollection");
        let a = attrs(Method::PUT, "/api/v1/namespaces/ns/finalize", "");
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("namespaces", "ns", "finalize")
        );
        assert!(!attrs(Method::GET, "/apis/apps/v1", "").is_resource_request());
        assert!(!attrs(Method::GET, "/version", "").is_resource_request());
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let a = attrs(
            Method::PATCH,
            "/apis/apps/v1/namespaces/ns/deployments/d",
            "",
        );
        let rule = |v: Value| rule_allows(&v, &a);
        assert!(rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
        ));
        assert!(!rule(
            json!({"apiGroups": [""], "resources": ["deployments"], "verbs": ["patch"]})
        ));
        assert!(!rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["update"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["d"], "verbs": ["patch"]})
        ));
        assert!(!rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["e"], "verbs": ["patch"]})
        ));
        // A subresource needs its own rule.
        let s = attrs(
            Method::PUT,
            "/apis/apps/v1/namespaces/ns/deployments/d/status",
            "",
        );
        assert!(!rule_allows(
            &json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["update"]}),
            &s
        ));
        assert!(rule_allows(
            &json!({"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["update"]}),
            &s
        ));
        // Names never narrow a list.
        let l = attrs(Method::GET, "/apis/apps/v1/deployments", "");
        assert!(!rule_allows(
            &json!({"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["d"], "verbs": ["list"]}),
            &l
        ));
    }

    #[test]
    fn forbidden_messages_match_a_real_server() {
        let user = UserInfo::service_account("default", "ctl");
        let e = attrs(Method::GET, "/api/v1/namespaces/default/pods/web", "").forbidden(&user);
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(
            e.message,
            "pods \"web\" is forbidden: User \"system:serviceaccount:default:ctl\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let e = attrs(Method::GET, "/apis/apps/v1/deployments", "").forbidden(&user);
        assert_eq!(
            e.message,
            "deployments.apps is forbidden: User \"system:serviceaccount:default:ctl\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        );
        let e = attrs(Method::PUT, "/apis/x.io/v1/namespaces/a/foos/f/status", "").forbidden(&user);
        assert!(
            e.message
                .contains("cannot update resource \"foos/status\" in API group \"x.io\"")
        );
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            bearer_token(&h).map(str::to_string)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("BEARER  abc ").as_deref(), Some("abc"));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearerabc"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let user = UserInfo::service_account("team", "ctl");
        let b = |s: Value| json!({ "subjects": [s] });
        assert!(binds(
            &b(json!({"kind": "ServiceAccount", "name": "ctl", "namespace": "team"})),
            &user,
            ""
        ));
        assert!(binds(
            &b(json!({"kind": "ServiceAccount", "name": "ctl"})),
            &user,
            "team"
        ));
        assert!(!binds(
            &b(json!({"kind": "ServiceAccount", "name": "ctl", "namespace": "other"})),
            &user,
            ""
        ));
        assert!(binds(
            &b(json!({"kind": "Group", "name": "system:serviceaccounts:team"})),
            &user,
            ""
        ));
        assert!(binds(
            &b(json!({"kind": "User", "name": "system:serviceaccount:team:ctl"})),
            &user,
            ""
        ));
        assert!(!binds(
            &b(json!({"kind": "User", "name": "ctl"})),
            &user,
            ""
        ));
    }
}
