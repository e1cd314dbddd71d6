//! Admission, as kube-apiserver runs it on every create, update, delete and
//! subresource write (dry runs included): mutating webhooks first, one
//! after the other, their `JSONPatch` answers applied and
//! `reinvocationPolicy: IfNeeded` webhooks called once more when a later
//! one changed the object (a webhook matched through another version of a
//! custom resource sees, and patches, the object in its rule's version:
//! [`versions`]); then (after the caller's schema validation)
//! ValidatingAdmissionPolicies ([`policy`]) and validating webhooks. Each webhook is matched by its rules, match policy,
//! namespace and object selectors and CEL `matchConditions`; a dry run
//! refuses a webhook with side effects; a denial answers the status the
//! webhook set; a call that fails (transport, timeout, an invalid answer)
//! refuses the write under `failurePolicy: Fail` and is skipped under
//! `Ignore`. Warnings are collected for the response.
//!
//! This sits in the HTTP layer, under the write handlers: it reads the
//! webhook configurations from storage (never holding storage while a
//! webhook is called) and calls webhooks with [`client`].

pub mod client;
pub mod policy;
pub mod review;
pub mod rules;
mod versions;

use crate::error::{ApiError, Cause, Details};
use crate::http::state::Server;
use crate::resources::registry::ResourceInfo;
use crate::resources::schema::expr::{Activation, Expression};
use review::{Attributes, Verdict};
use serde_json::Value;
use std::time::Duration;
pub use versions::Convert;
use versions::Versions;

const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING: &str = "admissionregistration.k8s.io/mutatingwebhookconfigurations";
const VALIDATING: &str = "admissionregistration.k8s.io/validatingwebhookconfigurations";

/// One webhook of a configuration.
#[derive(Debug, Clone)]
struct Hook {
    /// The webhook's JSON (`MutatingWebhook` or `ValidatingWebhook`).
    spec: Value,
}

impl Hook {
    fn name(&self) -> &str {
        self.spec["name"].as_str().unwrap_or("")
    }

    fn fail_closed(&self) -> bool {
        self.spec["failurePolicy"].as_str() != Some("Ignore")
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(
            self.spec["timeoutSeconds"]
                .as_u64()
                .unwrap_or(10)
                .clamp(1, 30),
        )
    }

    fn reinvoke(&self) -> bool {
        self.spec["reinvocationPolicy"].as_str() == Some("IfNeeded")
    }
}

/// What admission applies to one write: the webhooks and policies
/// configured when it started.
#[derive(Debug, Default)]
pub struct Admission {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
    policies: policy::Policies,
    /// The resource's served versions, for a custom resource.
    versions: Option<Versions>,
}

/// A webhook's answer to one call.
#[derive(Debug)]
struct Call {
    verdict: Verdict,
    /// The object as sent, when it was converted to the version the
    /// webhook's rule names.
    converted: Option<Value>,
}

/// The outcome of the mutating phase.
#[derive(Debug)]
pub struct Mutated {
    /// The object after every patch.
    pub object: Value,
    /// Whether any webhook changed it.
    pub changed: bool,
}

fn hooks_of(srv: &Server, res: &str) -> Vec<Hook> {
    let configs = srv.store.txn(|t| t.list(res, None));
    configs
        .iter()
        .flat_map(|(_, c)| c.value["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|spec| Hook { spec })
        .collect()
}

impl Admission {
    /// The admission of writes to `info`, or `None` when nothing is
    /// configured (or for the admission kinds themselves, which webhooks
    /// and policies never see, as on a cluster).
    pub fn load(srv: &Server, info: &ResourceInfo) -> Option<Admission> {
        if info.group == GROUP {
            return None;
        }
        let a = Admission {
            mutating: hooks_of(srv, MUTATING),
            validating: hooks_of(srv, VALIDATING),
            policies: policy::Policies::load(srv),
            versions: None,
        };
        if a.mutating.is_empty() && a.validating.is_empty() && a.policies.is_empty() {
            return None;
        }
        Some(Admission {
            versions: Versions::load(srv, info),
            ..a
        })
    }

    /// Convert a custom resource's objects with `convert` for webhooks
    /// whose rule names another version than the request's.
    pub fn with_conversion(mut self, convert: Convert) -> Admission {
        if let Some(v) = &mut self.versions {
            v.set_convert(convert);
        }
        self
    }

    /// Whether any mutating webhook is configured.
    pub fn has_mutating(&self) -> bool {
        !self.mutating.is_empty()
    }

    /// Run the mutating webhooks on `object`; `warnings` collects theirs.
    pub async fn mutate(
        &self,
        srv: &Server,
        attrs: &Attributes,
        mut object: Value,
        warnings: &mut Vec<String>,
    ) -> Result<Mutated, ApiError> {
        let mut changed = false;
        // Webhooks called so far that asked to be called again after a
        // later change, and which of them are due.
        let mut invoked: Vec<usize> = Vec::new();
        let mut due: Vec<usize> = Vec::new();
        for (i, hook) in self.mutating.iter().enumerate() {
            let seen = (!object.is_null()).then_some(&object);
            let Some(call) = self
                .call_if_matching(srv, hook, attrs, seen, warnings)
                .await?
            else {
                continue;
            };
            if self
                .apply_patch(srv, hook, call, &mut object, attrs)
                .await?
            {
                changed = true;
                for j in &invoked {
                    if !due.contains(j) {
                        due.push(*j);
                    }
                }
            }
            if hook.reinvoke() {
                invoked.push(i);
            }
        }
        for i in due {
            let hook = &self.mutating[i];
            let seen = (!object.is_null()).then_some(&object);
            if let Some(call) = self
                .call_if_matching(srv, hook, attrs, seen, warnings)
                .await?
            {
                changed |= self
                    .apply_patch(srv, hook, call, &mut object, attrs)
                    .await?;
            }
        }
        Ok(Mutated { object, changed })
    }

    /// Run the validating webhooks (all at once, as kube-apiserver does)
    /// and the admission policies on the object about to be stored (`None`
    /// on delete).
    pub async fn validate(
        &self,
        srv: &Server,
        attrs: &Attributes,
        object: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        // Policies first, as kube-apiserver orders its admission plugins.
        self.policies.validate(srv, attrs, object, warnings)?;
        let calls = self.validating.iter().map(|hook| async move {
            let mut w = Vec::new();
            let r = self
                .call_if_matching(srv, hook, attrs, object, &mut w)
                .await;
            (hook, r, w)
        });
        let mut first_error = None;
        for (hook, result, w) in futures::future::join_all(calls).await {
            warnings.extend(w);
            let err = match result {
                Ok(Some(c)) if !c.verdict.allowed => Some(denied(hook.name(), &c.verdict.status)),
                Ok(_) => None,
                Err(e) => Some(e),
            };
            if first_error.is_none() {
                first_error = err;
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Apply a mutating webhook's answer: a denial is an error, a patch
    /// changes the object (answers whether it did). A patch to an object
    /// sent in another version applies there, and the result is converted
    /// back to the request's version.
    async fn apply_patch(
        &self,
        srv: &Server,
        hook: &Hook,
        call: Call,
        object: &mut Value,
        attrs: &Attributes,
    ) -> Result<bool, ApiError> {
        if !call.verdict.allowed {
            return Err(denied(hook.name(), &call.verdict.status));
        }
        let Some(patch) = call.verdict.patch.filter(|_| attrs.operation != "DELETE") else {
            return Ok(false);
        };
        match (call.converted, &self.versions) {
            (Some(mut sent), Some(versions)) => {
                if !patch_in_place(hook, &mut sent, &patch)? {
                    return Ok(false);
                }
                *object = versions.convert(srv, &sent, &attrs.version).await?;
                Ok(true)
            }
            _ => patch_in_place(hook, object, &patch),
        }
    }

    /// Call `hook` if it matches the request; `Ok(None)` when it does not
    /// (or failed under `Ignore`).
    async fn call_if_matching(
        &self,
        srv: &Server,
        hook: &Hook,
        attrs: &Attributes,
        object: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Call>, ApiError> {
        let spec = &hook.spec;
        let scope = rules::Scope {
            group: &attrs.resource_group,
            version: &attrs.version,
            resource: &attrs.resource,
            sub: &attrs.sub,
            operation: attrs.operation,
            namespaced: attrs.namespaced,
        };
        let eq = match (spec["matchPolicy"].as_str(), &self.versions) {
            (Some("Exact"), _) => rules::Equivalents::Exact,
            (_, Some(v)) => rules::Equivalents::Versions(v.served()),
            (_, None) => rules::Equivalents::AnyVersion,
        };
        let Some(version) = rules::matched_version(&spec["rules"], &scope, eq) else {
            return Ok(None);
        };
        if let Some(labels) = namespace_labels(srv, attrs, object)
            && !rules::selector_matches(
                &spec["namespaceSelector"],
                labels.as_object().map(|_| &labels),
            )
        {
            return Ok(None);
        }
        if !rules::object_selector_matches(
            &spec["objectSelector"],
            object,
            attrs.old_object.as_ref(),
        ) {
            return Ok(None);
        }
        // The webhook sees the write in its rule's version.
        let versioned = match &self.versions {
            Some(versions) if version != attrs.version => {
                let mut a = attrs.clone();
                a.webhook_version = Some(version.clone());
                if let Some(old) = &attrs.old_object {
                    a.old_object = Some(versions.convert(srv, old, &version).await?);
                }
                let o = match object {
                    Some(o) => Some(versions.convert(srv, o, &version).await?),
                    None => None,
                };
                Some((a, o))
            }
            _ => None,
        };
        let (attrs, object) = match &versioned {
            Some((a, o)) => (a, o.as_ref()),
            None => (attrs, object),
        };
        let uid = uuid::Uuid::new_v4().to_string();
        match conditions_hold(spec, attrs, &uid, object) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(why) => return failed(hook, why),
        }
        if attrs.dry_run && !matches!(spec["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")) {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name()
            )));
        }
        let body = serde_json::to_vec(&attrs.review(&uid, object)).unwrap_or_default();
        let limit = srv.config.max_body_bytes;
        let answer = client::post(
            &spec["clientConfig"],
            &srv.config.webhook_services,
            body,
            hook.timeout(),
            limit,
        )
        .await;
        let verdict = match answer {
            Ok(b) => review::parse(&b, &uid),
            Err(e) => Err(format!("failed to call webhook: {e}")),
        };
        match verdict {
            Ok(v) => {
                warnings.extend(v.warnings.iter().cloned());
                let converted = versioned.and_then(|(_, o)| o);
                Ok(Some(Call {
                    verdict: v,
                    converted,
                }))
            }
            Err(why) => failed(hook, why),
        }
    }
}

/// A JSON patch applied to `object` (answers whether it changed it).
fn patch_in_place(
    hook: &Hook,
    object: &mut Value,
    patch: &json_patch::Patch,
) -> Result<bool, ApiError> {
    let before = object.clone();
    json_patch::patch(object, patch).map_err(|e| {
        ApiError::internal(format!(
            "Internal error occurred: admission webhook {:?} returned a patch that cannot be applied: {e}",
            hook.name()
        ))
    })?;
    Ok(*object != before)
}

/// The error of a webhook that denied the request, as kube-apiserver words
/// it (a code under 400 becomes 400).
fn denied(name: &str, status: &Value) -> ApiError {
    let by = format!("admission webhook {name:?} denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().unwrap_or("");
    let text = match (message, reason) {
        (Some(m), _) => format!("{by}: {m}"),
        (None, r) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let code = status["code"].as_u64().map_or(400, |c| c.max(400)) as u16;
    let mut error = ApiError::new(code, reason, text);
    // The webhook's details (name, group, kind, field causes) reach the
    // client as it sent them, as kube-apiserver passes them on.
    let details = &status["details"];
    if details.is_object() {
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        error.causes = details["causes"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|c| Cause {
                reason: text(&c["reason"]),
                message: text(&c["message"]),
                field: text(&c["field"]),
            })
            .collect();
        error.details = Some(Box::new(Details {
            name: text(&details["name"]),
            group: text(&details["group"]),
            kind: text(&details["kind"]),
        }));
    }
    error
}

/// A failed call: refuses the write under `Fail`, skipped under `Ignore`.
fn failed<T>(hook: &Hook, why: String) -> Result<Option<T>, ApiError> {
    if hook.fail_closed() {
        Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook {:?}: {why}",
            hook.name()
        )))
    } else {
        tracing::debug!(webhook = hook.name(), %why, "webhook call failed, ignored");
        Ok(None)
    }
}

/// The labels the namespace selector is matched against: the namespace's
/// own for a Namespace, its namespace's for a namespaced object; `None`
/// for other cluster-scoped objects (the selector does not apply).
pub(crate) fn namespace_labels(
    srv: &Server,
    attrs: &Attributes,
    object: Option<&Value>,
) -> Option<Value> {
    if attrs.resource_group.is_empty() && attrs.resource == "namespaces" {
        let o = object.or(attrs.old_object.as_ref())?;
        return Some(o["metadata"]["labels"].clone());
    }
    if !attrs.namespaced {
        return None;
    }
    let key = (String::new(), attrs.namespace.clone());
    let ns = srv.store.txn(|t| t.get("/namespaces", &key));
    Some(ns.map_or(Value::Null, |n| n.value["metadata"]["labels"].clone()))
}

/// Whether every CEL `matchCondition` of a webhook holds.
fn conditions_hold(
    spec: &Value,
    attrs: &Attributes,
    uid: &str,
    object: Option<&Value>,
) -> Result<bool, String> {
    let conditions = spec["matchConditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if conditions.is_empty() {
        return Ok(true);
    }
    let act = Activation::new()
        .json("object", object.unwrap_or(&Value::Null))
        .json(
            "oldObject",
            attrs.old_object.as_ref().unwrap_or(&Value::Null),
        )
        .json("request", &attrs.request(uid));
    for c in conditions {
        let name = c["name"].as_str().unwrap_or("");
        let src = c["expression"].as_str().unwrap_or("");
        let holds = Expression::compile(src, &["object", "oldObject", "request"])
            .and_then(|e| e.eval_bool(&act))
            .map_err(|e| format!("failed to evaluate match condition {name:?}: {e}"))?;
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}
