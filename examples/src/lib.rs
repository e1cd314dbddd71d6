//! Shared helpers for the examples: choosing the cluster (the embedded demo
//! unless one is chosen explicitly, see [`cluster`]), building small demo
//! objects, and writing with the API server's warnings.

pub mod cluster;
pub mod sample;

use std::collections::BTreeMap;

use controller_runtime::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use controller_runtime::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta,
};

/// Installs a `tracing` subscriber writing to stderr: `RUST_LOG` if set, else
/// `default_filter`. Colours only when stderr is a terminal, so logs piped to
/// a file stay plain text.
///
/// ```
/// informer_examples::init_tracing("warn");
/// ```
pub fn init_tracing(default_filter: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // A second call (as in doc tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// A minimal valid Deployment `name` in `default` running nginx.
///
/// ```
/// use informer_examples::{demo_deployment, deployment_spec};
/// let d = demo_deployment("web", 2);
/// assert_eq!(deployment_spec(&d).and_then(|s| s.replicas), Some(2));
/// ```
// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under every version this crate builds for.
#[allow(clippy::useless_conversion)]
pub fn demo_deployment(name: &str, replicas: i32) -> Deployment {
    let labels: BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".to_string(),
                        image: Some("nginx:1.27".to_string()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }
        .into(),
        ..Deployment::default()
    }
}

/// `d`'s spec, if it has one, under every Kubernetes version these programs
/// build for: `Deployment::spec` is an `Option` up to 1.36 and a plain
/// `DeploymentSpec` from 1.37, and `From` turns a reference to either into
/// an `Option` of a reference.
///
/// ```
/// use informer_examples::{demo_deployment, deployment_spec};
/// let d = demo_deployment("web", 3);
/// assert_eq!(deployment_spec(&d).and_then(|s| s.replicas), Some(3));
/// ```
pub fn deployment_spec(d: &Deployment) -> Option<&DeploymentSpec> {
    Option::from(&d.spec)
}

/// The API server's answer to a write sent by [`create_with_warnings`] or
/// [`replace_with_warnings`].
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status code.
    pub code: u16,
    /// The body: the object written, or a `Status`.
    pub body: serde_json::Value,
    /// The text of each `Warning` header (admission webhooks' warnings,
    /// deprecated versions...), as kubectl prints them after `Warning: `.
    pub warnings: Vec<String>,
}

/// Creates `obj` in `namespace` and returns the answer with its warnings.
///
/// kube-client's `Api::create` drops the `Warning` headers an admission
/// webhook's warnings arrive in, so this sends the same request through
/// [`Client::send`](controller_runtime::kube_client::Client::send) and reads
/// them.
///
/// ```no_run
/// # async fn demo(client: controller_runtime::kube_client::Client) -> anyhow::Result<()> {
/// use informer_examples::sample::{Foo, FooSpec};
/// let foo = Foo::new("big", FooSpec { deployment_name: "big-web".into(), replicas: Some(12) });
/// let answer = informer_examples::create_with_warnings(&client, "default", &foo, &Default::default()).await?;
/// for w in answer.warnings {
///     println!("Warning: {w}");
/// }
/// # Ok(()) }
/// ```
pub async fn create_with_warnings<K>(
    client: &controller_runtime::kube_client::Client,
    namespace: &str,
    obj: &K,
    params: &controller_runtime::kube_client::api::PostParams,
) -> anyhow::Result<Answer>
where
    K: controller_runtime::kube_client::Resource<DynamicType = ()> + serde::Serialize,
{
    let path = K::url_path(&(), Some(namespace));
    let req = controller_runtime::kube_client::core::Request::new(path)
        .create(params, serde_json::to_vec(obj)?)?;
    send(client, req).await
}

/// Replaces the object `name` in `namespace` with `obj` and returns the
/// answer with its warnings (see [`create_with_warnings`]).
pub async fn replace_with_warnings<K>(
    client: &controller_runtime::kube_client::Client,
    namespace: &str,
    name: &str,
    obj: &K,
) -> anyhow::Result<Answer>
where
    K: controller_runtime::kube_client::Resource<DynamicType = ()> + serde::Serialize,
{
    let path = K::url_path(&(), Some(namespace));
    let req = controller_runtime::kube_client::core::Request::new(path).replace(
        name,
        &Default::default(),
        serde_json::to_vec(obj)?,
    )?;
    send(client, req).await
}

async fn send(
    client: &controller_runtime::kube_client::Client,
    req: http::Request<Vec<u8>>,
) -> anyhow::Result<Answer> {
    let resp = client
        .send(req.map(controller_runtime::kube_client::client::Body::from))
        .await?;
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(warning_text)
        .collect();
    let bytes = resp.into_body().collect_bytes().await?;
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Ok(Answer {
        code,
        body,
        warnings,
    })
}

/// The text of a `Warning` header (`299 - "text"`, RFC 7234).
fn warning_text(header: &str) -> String {
    let rest = header.strip_prefix("299 - ").unwrap_or(header);
    match rest
        .strip_prefix('"')
        .and_then(|r| r.rfind('"').map(|end| &r[..end]))
    {
        Some(quoted) => quoted.replace("\\\"", "\"").replace("\\\\", "\\"),
        None => rest.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn warning_headers_are_unquoted() {
        assert_eq!(
            super::warning_text(r#"299 - "replicas \"12\" is many""#),
            r#"replicas "12" is many"#
        );
        assert_eq!(super::warning_text("plain"), "plain");
    }
}
