//! Every serde enum shape in a derived spec gives a CRD the API server
//! accepts: here the adjacently tagged enum whose variants carry content of
//! different JSON types (a string and an object), and the externally tagged
//! enum mixing unit and struct variants, both of which used to fail at run
//! time in `crd()` with `NonStructural`.

use ::envtest::TestEnv;
use controller_runtime::CustomResource;
use kube_client::api::{Api, PostParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where to send a notice: the tag says how, the content where.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(tag = "via", content = "to")]
pub enum Notify {
    /// An address.
    Email(String),
    /// An endpoint.
    Webhook {
        /// Its URL.
        url: String,
    },
}

/// A kind holding the enum.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Alert", namespaced)]
pub struct AlertSpec {
    /// Where to send it.
    pub notify: Notify,
    /// A second, optional one.
    pub fallback: Option<Notify>,
}

#[tokio::test]
async fn adjacently_tagged_content_of_two_types_derives_a_crd_the_server_accepts() {
    let crd = Alert::crd().expect("an adjacently tagged enum must give a structural schema");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let to = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["notify"]["properties"]
        ["to"];
    assert_eq!(to["x-kubernetes-preserve-unknown-fields"], true, "{to}");

    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    crate::envtest::install(&client, &crd).await;
    let api: Api<Alert> = Api::namespaced(client, "default");
    for (name, notify) in [
        ("mail", Notify::Email("ops@example.com".into())),
        (
            "hook",
            Notify::Webhook {
                url: "https://hooks.example.com/x".into(),
            },
        ),
    ] {
        let spec = AlertSpec {
            notify: notify.clone(),
            fallback: Some(Notify::Email("oncall@example.com".into())),
        };
        api.create(&PostParams::default(), &Alert::new(name, spec.clone()))
            .await
            .unwrap();
        // Read back as written: the untyped content was kept, not pruned.
        assert_eq!(api.get(name).await.unwrap().spec, spec);
    }
}

/// How a listener is set: off (a unit variant, the string `"Off"`) or on a
/// port (a struct variant, `{"Http": {"port": 80}}`), externally tagged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub enum Mode {
    /// Not listening.
    Off,
    /// Listening.
    Http {
        /// The port.
        port: u16,
    },
}

/// A kind holding the mixed enum.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Listener", namespaced)]
pub struct ListenerSpec {
    /// How it listens.
    pub mode: Mode,
    /// Another, optional.
    pub fallback: Option<Mode>,
}

#[tokio::test]
async fn unit_and_struct_variants_together_derive_a_crd_the_server_accepts() {
    let crd = Listener::crd().expect("a unit-and-struct enum must give a structural schema");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let mode = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["mode"];
    assert_eq!(mode["x-kubernetes-preserve-unknown-fields"], true, "{mode}");

    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    crate::envtest::install(&client, &crd).await;
    let api: Api<Listener> = Api::namespaced(client, "default");
    for (name, mode) in [("off", Mode::Off), ("on", Mode::Http { port: 8080 })] {
        let spec = ListenerSpec {
            mode: mode.clone(),
            fallback: Some(Mode::Off),
        };
        api.create(&PostParams::default(), &Listener::new(name, spec.clone()))
            .await
            .unwrap();
        // Both shapes kept as written, neither pruned.
        assert_eq!(api.get(name).await.unwrap().spec, spec);
    }
}
