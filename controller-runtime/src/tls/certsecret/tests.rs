use super::*;

/// The annotations are in the project's one domain (`informer-rs.io`)
/// alone: nothing is written under the old `webhook.informer-rs.dev/`, and
/// a Secret holding only the old keys is not read as a pair (it is
/// replaced, as any unreadable one).
#[tokio::test]
async fn annotations_are_in_the_one_domain_only() {
    for key in [
        NOT_AFTER_ANNOTATION,
        CA_NOT_AFTER_ANNOTATION,
        CA_ROTATION_ANNOTATION,
    ] {
        assert!(key.starts_with("webhook.informer-rs.io/"), "{key}");
    }
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = Client::try_from(config).unwrap();
    let certs = SecretCerts::new(client, "system", "hooks", CertResolver::new());
    let now = SystemTime::now();
    let pair = SelfSigned::generate("hooks", "system", now, Duration::from_secs(3600)).unwrap();
    let written = certs.to_secret(&pair, None, None);
    let annotations = written.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key(NOT_AFTER_ANNOTATION),
        "{annotations:?}"
    );
    assert!(
        annotations
            .keys()
            .all(|k| k.starts_with("webhook.informer-rs.io/")),
        "{annotations:?}"
    );

    let mut old = written;
    old.metadata.annotations = Some(
        annotations
            .into_iter()
            .map(|(k, v)| (k.replace(".io/", ".dev/"), v))
            .collect(),
    );
    assert!(SecretCerts::from_secret(&old).is_none());
}
