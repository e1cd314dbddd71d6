//! Kubeconfigs for a running server: one cluster, user and context, all
//! named `envtest`, default namespace `default`; with TLS the cluster trusts
//! the server's generated CA, with a bearer token the user carries it.

/// A kubeconfig for a server at `base_url` (context and cluster `envtest`).
pub fn kubeconfig_yaml(base_url: &str) -> String {
    kubeconfig_yaml_with_token(base_url, None)
}

/// A kubeconfig for a server at `base_url` whose user carries `token`.
pub fn kubeconfig_yaml_with_token(base_url: &str, token: Option<&str>) -> String {
    kubeconfig_yaml_with_ca(base_url, token, None)
}

/// A kubeconfig for a server at `base_url` whose user carries `token`,
/// trusting the CA certificate `ca_pem` (PEM) for an `https://` server.
///
/// ```
/// let yaml = envtest::kubeconfig_yaml_with_ca("https://127.0.0.1:6443", Some("t"), Some("PEM"));
/// assert!(yaml.contains("certificate-authority-data: UEVN\n"));
/// assert!(yaml.contains("token: \"t\""));
/// ```
pub fn kubeconfig_yaml_with_ca(
    base_url: &str,
    token: Option<&str>,
    ca_pem: Option<&str>,
) -> String {
    let user = match token {
        Some(t) => format!("\n    token: {}", serde_json::Value::String(t.to_string())),
        None => " {}".to_string(),
    };
    let ca = match ca_pem {
        Some(pem) => format!(
            "\n    certificate-authority-data: {}",
            crate::tls::authority_data(pem)
        ),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {base_url}{ca}\nusers:\n- name: envtest\n  user:{user}\ncontexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: envtest\n    namespace: default\ncurrent-context: envtest\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_client::config::Kubeconfig;

    fn cluster(yaml: &str) -> kube_client::config::Cluster {
        let kc = Kubeconfig::from_yaml(yaml).unwrap();
        kc.clusters[0].cluster.clone().unwrap()
    }

    #[test]
    fn the_ca_and_token_are_where_clients_read_them() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let yaml = kubeconfig_yaml_with_ca("https://127.0.0.1:1", Some("t\"x"), Some(pem));
        let c = cluster(&yaml);
        assert_eq!(c.server.as_deref(), Some("https://127.0.0.1:1"));
        assert_eq!(
            c.certificate_authority_data.as_deref(),
            Some(crate::tls::authority_data(pem).as_str())
        );
        let kc = Kubeconfig::from_yaml(&yaml).unwrap();
        let user = kc.auth_infos[0].auth_info.clone().unwrap();
        assert!(user.token.is_some());
        assert!(yaml.contains(r#"token: "t\"x""#), "quotes survive: {yaml}");
        let plain = cluster(&kubeconfig_yaml("http://127.0.0.1:1"));
        assert_eq!(plain.certificate_authority_data, None);
    }
}
