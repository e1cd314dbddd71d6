use super::*;

/// The annotations are in the project's one domain (`informer-rs.io`), and
/// a Secret written by the previous release, with only the old domain's
/// keys, is still read; each write carries both, for replicas of that
/// release during a rolling upgrade.
#[tokio::test]
async fn annotations_are_in_the_one_domain_and_the_old_one_is_still_read() {
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
    let at = annotations.get("webhook.informer-rs.io/not-after");
    assert!(at.is_some(), "{annotations:?}");
    assert_eq!(annotations.get("webhook.informer-rs.dev/not-after"), at);

    let mut old = written;
    old.metadata.annotations = Some(
        annotations
            .into_iter()
            .filter(|(k, _)| k.starts_with("webhook.informer-rs.dev/"))
            .collect(),
    );
    let (read, rotation) = SecretCerts::from_secret(&old).expect("read from the old keys");
    assert_eq!(read.cert_pem(), pair.cert_pem());
    assert!(rotation.is_none());
}
