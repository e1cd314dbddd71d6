//! The builder's CRDs: read from directories, and installed into a local
//! server through its API.

use super::TestEnv;
use crate::error::Error;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::time::Duration;

/// How long [`TestEnvBuilder::start`] waits for installed CRDs to be served.
const CRD_SERVED_TIMEOUT: Duration = Duration::from_secs(10);

/// The CRDs in the `.yaml`/`.yml`/`.json` files of `dir`, in file-name order.
pub(super) fn read_crd_dir(dir: &std::path::Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let io_error = |path: &std::path::Path, source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_error(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
        let invalid = |message: String| {
            io_error(
                &file,
                std::io::Error::new(std::io::ErrorKind::InvalidData, message),
            )
        };
        let docs: Vec<serde_json::Value> = if file.extension().is_some_and(|e| e == "json") {
            vec![serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?]
        } else {
            serde_saphyr::from_multiple(&text).map_err(|e| invalid(e.to_string()))?
        };
        for doc in docs {
            if doc.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd = serde_json::from_value(doc)
                .map_err(|e| invalid(format!("not a valid CustomResourceDefinition: {e}")))?;
            crds.push(crd);
        }
    }
    Ok(crds)
}

/// Creates `crds` through the API (so they are validated as any client's
/// would be) and waits until every served version lists.
pub(super) async fn install_crds(
    env: &TestEnv,
    crds: &[CustomResourceDefinition],
) -> Result<(), Error> {
    let api: kube_client::Api<CustomResourceDefinition> = kube_client::Api::all(env.client());
    let failed = |message: String| Error::Client {
        url: env.base_url.clone(),
        message,
    };
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&Default::default(), crd)
            .await
            .map_err(|e| failed(format!("installing CRD {name}: {e}")))?;
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let path = format!(
                "/apis/{}/{}/{}",
                crd.spec.group, version.name, crd.spec.names.plural
            );
            let deadline = tokio::time::Instant::now() + CRD_SERVED_TIMEOUT;
            loop {
                let request = http::Request::get(&path)
                    .body(Vec::new())
                    .map_err(|e| failed(e.to_string()))?;
                match env.client.request_text(request).await {
                    Ok(_) => break,
                    Err(e) if tokio::time::Instant::now() >= deadline => {
                        return Err(failed(format!(
                            "CRD {name} version {} not served within {CRD_SERVED_TIMEOUT:?}: {e}",
                            version.name
                        )));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }
    }
    Ok(())
}
