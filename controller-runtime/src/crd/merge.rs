//! Joining the single-version definitions of one kind into one
//! CustomResourceDefinition.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::CrdError;

/// Joins the definitions of several versions of one kind (for example
/// `v1alpha1::Foo::crd()?` and `v1::Foo::crd()?`) into one.
///
/// Every input must name the same group, kind, plural and scope; version
/// names must be distinct; exactly one version must be the storage version.
/// Names (short names, categories), annotations and labels are taken from
/// the storage version; versions keep the order given.
///
/// ```
/// use controller_runtime::crd::{CrdVersionInfo, merge_versions, version_crd};
///
/// let mut old = CrdVersionInfo::new("example.com", "v1alpha1", "Widget", "widgets");
/// old.storage = false;
/// let new = CrdVersionInfo::new("example.com", "v1", "Widget", "widgets");
/// let spec = |g: &mut schemars::SchemaGenerator| g.subschema_for::<String>();
/// let crd = merge_versions(vec![
///     version_crd(&old, spec, None, None).unwrap(),
///     version_crd(&new, spec, None, None).unwrap(),
/// ])
/// .unwrap();
/// assert_eq!(crd.spec.versions.len(), 2);
///
/// // Two storage versions are refused.
/// let mut also_storage = old;
/// also_storage.storage = true;
/// assert!(merge_versions(vec![
///     version_crd(&also_storage, spec, None, None).unwrap(),
///     version_crd(&new, spec, None, None).unwrap(),
/// ])
/// .is_err());
/// ```
pub fn merge_versions(
    crds: Vec<CustomResourceDefinition>,
) -> Result<CustomResourceDefinition, CrdError> {
    let Some(first) = crds.first() else {
        return Err(CrdError::NoVersions);
    };
    for other in &crds[1..] {
        let checks: [(&'static str, &str, &str); 5] = [
            ("group", &first.spec.group, &other.spec.group),
            ("kind", &first.spec.names.kind, &other.spec.names.kind),
            ("plural", &first.spec.names.plural, &other.spec.names.plural),
            ("scope", &first.spec.scope, &other.spec.scope),
            (
                "name",
                first.metadata.name.as_deref().unwrap_or_default(),
                other.metadata.name.as_deref().unwrap_or_default(),
            ),
        ];
        for (what, a, b) in checks {
            if a != b {
                return Err(CrdError::Disagree {
                    what,
                    first: a.to_owned(),
                    second: b.to_owned(),
                });
            }
        }
    }
    let mut versions = Vec::new();
    let mut storage = Vec::new();
    let mut base = None;
    for crd in crds {
        for v in &crd.spec.versions {
            if versions
                .iter()
                .any(|seen: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| seen.name == v.name)
            {
                return Err(CrdError::DuplicateVersion(v.name.clone()));
            }
            if v.storage {
                storage.push(v.name.clone());
            }
            versions.push(v.clone());
        }
        if crd.spec.versions.iter().any(|v| v.storage) || base.is_none() {
            let is_storage = crd.spec.versions.iter().any(|v| v.storage);
            if is_storage || base.is_none() {
                base = Some(crd);
            }
        }
    }
    if storage.len() != 1 {
        return Err(CrdError::StorageVersions(storage.len(), storage));
    }
    let mut out = base.ok_or(CrdError::NoVersions)?;
    out.spec.versions = versions;
    Ok(out)
}
