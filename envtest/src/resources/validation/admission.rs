//! What the API server refuses in a Validating- or
//! MutatingWebhookConfiguration (422 Invalid, every cause listed): a
//! webhook's `timeoutSeconds` outside 1 to 30, and a rule `scope` other than
//! `*`, `Cluster` or `Namespaced`. The rest of its validation (names,
//! client configs, `sideEffects`, ...) is not checked here.

use crate::error::{ApiError, Cause};
use crate::resources::registry::ResourceInfo;
use serde_json::Value;

/// The scopes a rule may name.
const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];

/// Refuse `obj` (a webhook configuration after defaulting) when a webhook
/// has a timeout or a rule a scope the API server refuses; other kinds pass.
pub fn check_webhooks(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    if info.group != "admissionregistration.k8s.io"
        || !matches!(
            info.plural.as_str(),
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations"
        )
    {
        return Ok(());
    }
    let mut causes = Vec::new();
    let hooks = obj["webhooks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for (i, hook) in hooks.iter().enumerate() {
        let timeout = &hook["timeoutSeconds"];
        if !timeout.is_null() && !timeout.as_i64().is_some_and(|t| (1..=30).contains(&t)) {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"
                ),
                field: format!("webhooks[{i}].timeoutSeconds"),
            });
        }
        let rules = hook["rules"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for (j, rule) in rules.iter().enumerate() {
            let Some(scope) = rule["scope"].as_str() else {
                continue;
            };
            if !SCOPES.contains(&scope) {
                causes.push(Cause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: {scope:?}: supported values: \"*\", \"Cluster\", \"Namespaced\""
                    ),
                    field: format!("webhooks[{i}].rules[{j}].scope"),
                });
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    Err(ApiError::invalid_causes(
        &format!("{}.{}", info.kind, info.group),
        name,
        causes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(plural: &str) -> std::sync::Arc<ResourceInfo> {
        crate::resources::registry::Registry::with_builtins()
            .get("admissionregistration.k8s.io", "v1", plural)
            .unwrap()
    }

    #[test]
    fn timeouts_outside_one_to_thirty_and_unknown_scopes_are_invalid() {
        let vwc = info("validatingwebhookconfigurations");
        let hook = |t: Value, scope: &str| {
            json!({"metadata": {"name": "v"}, "webhooks": [{"name": "a.b.c", "timeoutSeconds": t,
                "rules": [{"scope": scope}]}]})
        };
        for ok in [1, 10, 30] {
            assert!(
                check_webhooks(&vwc, &hook(json!(ok), "Namespaced")).is_ok(),
                "{ok}"
            );
        }
        assert!(check_webhooks(&vwc, &json!({"webhooks": [{"name": "a.b.c"}]})).is_ok());
        let e = check_webhooks(&vwc, &hook(json!(31), "Cluster")).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"v\" is invalid: webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
        );
        let e = check_webhooks(
            &info("mutatingwebhookconfigurations"),
            &hook(json!(0), "Namespace"),
        )
        .unwrap_err();
        let fields: Vec<&str> = e.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["webhooks[0].timeoutSeconds", "webhooks[0].rules[0].scope"]
        );
    }
}
