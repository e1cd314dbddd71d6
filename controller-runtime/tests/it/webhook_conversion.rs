//! Conversion webhooks over real TLS with real ConversionReview bodies: a
//! round trip v1alpha1 -> v1 -> v1alpha1 keeping metadata, a conversion
//! keeping a lossy field in an annotation (labels and annotations may
//! change, nothing else of metadata), failures
//! reported as a failed ConversionReview, a panicking conversion that
//! leaves the server serving, and a property: for random spec values,
//! v1alpha1 -> hub -> v1alpha1 is the identity.

use controller_runtime::webhook::{CONVERT_PATH, Conversion, ConversionError, Convertible, Hub};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::webhook_client::start;

pub mod v1alpha1 {
    use controller_runtime::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The old shape: a flat deployment name.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[resource(
        group = "convert.example.com",
        version = "v1alpha1",
        kind = "Gizmo",
        namespaced,
        storage = false
    )]
    #[serde(rename_all = "camelCase")]
    pub struct GizmoSpec {
        pub deployment_name: String,
        pub replicas: Option<i32>,
        #[serde(default)]
        pub tags: Vec<String>,
    }
}

pub mod v1 {
    use controller_runtime::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The new shape: the deployment as a nested reference.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[resource(
        group = "convert.example.com",
        version = "v1",
        kind = "Gizmo",
        namespaced
    )]
    #[serde(rename_all = "camelCase")]
    pub struct GizmoSpec {
        pub deployment: DeploymentRef,
        pub replicas: Option<i32>,
        #[serde(default)]
        pub labels: Vec<String>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    pub struct DeploymentRef {
        pub name: String,
    }
}

impl Hub for v1::Gizmo {}

impl Convertible<v1::Gizmo> for v1alpha1::Gizmo {
    fn to_hub(self) -> Result<v1::Gizmo, ConversionError> {
        match self.spec.deployment_name.as_str() {
            "panic" => panic!("the conversion exploded"),
            "" => return Err(ConversionError::refused("deploymentName must not be empty")),
            _ => {}
        }
        Ok(v1::Gizmo {
            metadata: self.metadata,
            spec: v1::GizmoSpec {
                deployment: v1::DeploymentRef {
                    name: self.spec.deployment_name,
                },
                replicas: self.spec.replicas,
                labels: self.spec.tags,
            },
            status: None,
        })
    }

    fn from_hub(hub: v1::Gizmo) -> Result<Self, ConversionError> {
        Ok(v1alpha1::Gizmo {
            metadata: hub.metadata,
            spec: v1alpha1::GizmoSpec {
                deployment_name: hub.spec.deployment.name,
                replicas: hub.spec.replicas,
                tags: hub.spec.labels,
            },
            status: None,
        })
    }
}

pub fn conversion() -> Conversion<v1::Gizmo> {
    Conversion::<v1::Gizmo>::new().spoke::<v1alpha1::Gizmo>()
}

fn alpha(name: &str, deployment: &str, replicas: Option<i32>) -> Value {
    json!({
        "apiVersion": "convert.example.com/v1alpha1",
        "kind": "Gizmo",
        "metadata": {
            "name": name, "namespace": "default", "uid": "1b4c", "resourceVersion": "42",
            "labels": {"team": "a"},
            // A field newer than this build's ObjectMeta: kept all the same.
            "someFutureField": {"x": 1},
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "convert.example.com/v1alpha1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"deploymentName": deployment, "replicas": replicas, "tags": ["x"]},
    })
}

fn review(desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c0ffee", "desiredAPIVersion": desired, "objects": objects},
    })
}

fn response(body: &Value) -> &Value {
    assert_eq!(body["apiVersion"], "apiextensions.k8s.io/v1", "{body}");
    assert_eq!(body["kind"], "ConversionReview", "{body}");
    assert_eq!(body["response"]["uid"], "c0ffee", "{body}");
    &body["response"]
}

#[tokio::test]
async fn objects_convert_both_ways_through_the_hub_keeping_metadata() {
    let run = start(|s| s.conversion(conversion()).unwrap()).await;
    let old = vec![alpha("a", "web", Some(3)), alpha("b", "api", None)];
    let (status, body) = run
        .client
        .review(CONVERT_PATH, &review("convert.example.com/v1", old.clone()))
        .await;
    assert_eq!(status, 200);
    let resp = response(&body);
    assert_eq!(resp["result"]["status"], "Success", "{body}");
    let converted = resp["convertedObjects"].as_array().unwrap();
    assert_eq!(converted.len(), 2);
    assert_eq!(converted[0]["apiVersion"], "convert.example.com/v1");
    assert_eq!(
        converted[0]["spec"],
        json!({"deployment": {"name": "web"}, "replicas": 3, "labels": ["x"]})
    );
    assert_eq!(converted[1]["spec"]["deployment"]["name"], "api");
    // Metadata exactly as sent (managedFields included).
    assert_eq!(converted[0]["metadata"], old[0]["metadata"]);

    // And back: the same objects as first sent.
    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review("convert.example.com/v1alpha1", converted.clone()),
        )
        .await;
    assert_eq!(response(&body)["convertedObjects"], json!(old));
    assert_eq!(run.metrics.requests(CONVERT_PATH, 200), 2);
}

#[tokio::test]
async fn a_failed_or_panicking_conversion_fails_the_review_with_a_message() {
    let run = start(|s| s.conversion(conversion()).unwrap()).await;
    let to_v1 = "convert.example.com/v1";

    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review(
                to_v1,
                vec![alpha("a", "web", None), alpha("empty", "", None)],
            ),
        )
        .await;
    let result = &response(&body)["result"];
    assert_eq!(result["status"], "Failure", "{body}");
    assert_eq!(
        result["message"],
        "converting empty to convert.example.com/v1: deploymentName must not be empty"
    );

    let mut unknown = alpha("c", "web", None);
    unknown["apiVersion"] = json!("convert.example.com/v2");
    let (_, body) = run
        .client
        .review(CONVERT_PATH, &review(to_v1, vec![unknown]))
        .await;
    let message = response(&body)["result"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("no conversion registered for convert.example.com/v2 Gizmo"),
        "{message}"
    );

    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review("other.example.com/v1", vec![alpha("d", "web", None)]),
        )
        .await;
    assert_eq!(
        response(&body)["result"]["message"],
        "no conversion is registered for other.example.com/Gizmo"
    );

    let (status, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review(to_v1, vec![alpha("p", "panic", None)]),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        response(&body)["result"]["message"],
        "the conversion webhook panicked: the conversion exploded"
    );

    // Not a ConversionReview at all.
    let mut admission = review(to_v1, vec![]);
    admission["apiVersion"] = json!("apiextensions.k8s.io/v1beta1");
    assert_eq!(run.client.review(CONVERT_PATH, &admission).await.0, 400);

    // Still serving.
    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review(to_v1, vec![alpha("e", "web", Some(1))]),
        )
        .await;
    assert_eq!(response(&body)["result"]["status"], "Success");
    assert_eq!(run.metrics.panics(), 1);
    assert_eq!(run.metrics.requests(CONVERT_PATH, 200), 5);
    assert_eq!(run.metrics.requests(CONVERT_PATH, 400), 1);
}

proptest! {
    #[test]
    fn v1alpha1_to_the_hub_and_back_is_the_identity(
        name in "[a-z][a-z0-9-]{0,20}",
        deployment in "[a-z][a-z0-9.-]{0,40}",
        replicas in proptest::option::of(any::<i32>()),
        tags in proptest::collection::vec("\\PC{0,8}", 0..4),
    ) {
        let mut obj = alpha(&name, &deployment, replicas);
        obj["spec"]["tags"] = json!(tags);
        let c = conversion();
        let hub = c.convert(obj.clone(), "convert.example.com/v1").unwrap();
        prop_assert_eq!(&hub["apiVersion"], "convert.example.com/v1");
        let back = c.convert(hub, "convert.example.com/v1alpha1").unwrap();
        prop_assert_eq!(back, obj);
    }
}

/// A hub with a field its older version cannot hold: the older version
/// keeps it in an annotation, the usual way, so a round trip loses nothing.
pub mod lossy {
    pub mod v1 {
        use controller_runtime::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
        #[resource(
            group = "lossy.example.com",
            version = "v1",
            kind = "Sprocket",
            namespaced
        )]
        pub struct SprocketSpec {
            pub teeth: u32,
            pub color: Option<String>,
        }
    }

    pub mod v1beta1 {
        use controller_runtime::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
        #[resource(
            group = "lossy.example.com",
            version = "v1beta1",
            kind = "Sprocket",
            namespaced,
            storage = false
        )]
        pub struct SprocketSpec {
            pub teeth: u32,
        }
    }
}

const COLOR: &str = "lossy.example.com/color";

impl Hub for lossy::v1::Sprocket {}

impl Convertible<lossy::v1::Sprocket> for lossy::v1beta1::Sprocket {
    fn to_hub(mut self) -> Result<lossy::v1::Sprocket, ConversionError> {
        let color = self
            .metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove(COLOR));
        if self
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.is_empty())
        {
            self.metadata.annotations = None;
        }
        Ok(lossy::v1::Sprocket {
            metadata: self.metadata,
            spec: lossy::v1::SprocketSpec {
                teeth: self.spec.teeth,
                color,
            },
            status: None,
        })
    }

    fn from_hub(mut hub: lossy::v1::Sprocket) -> Result<Self, ConversionError> {
        if let Some(color) = hub.spec.color {
            hub.metadata
                .annotations
                .get_or_insert_default()
                .insert(COLOR.into(), color);
        }
        // A conversion that renames is a bug the server must refuse.
        if hub.spec.teeth == 0 {
            hub.metadata.name = Some("renamed".into());
        }
        Ok(lossy::v1beta1::Sprocket {
            metadata: hub.metadata,
            spec: lossy::v1beta1::SprocketSpec {
                teeth: hub.spec.teeth,
            },
            status: None,
        })
    }
}

fn sprocket(name: &str, teeth: u32) -> Value {
    json!({
        "apiVersion": "lossy.example.com/v1",
        "kind": "Sprocket",
        "metadata": {"name": name, "namespace": "default", "uid": "5a1d", "resourceVersion": "7",
                     "labels": {"team": "a"}, "someFutureField": 1},
        "spec": {"teeth": teeth, "color": "red"},
    })
}

#[tokio::test]
async fn a_conversion_may_change_labels_and_annotations_and_nothing_else_of_metadata() {
    let run = start(|s| {
        s.conversion(Conversion::<lossy::v1::Sprocket>::new().spoke::<lossy::v1beta1::Sprocket>())
            .unwrap()
    })
    .await;
    let hub = sprocket("s", 12);
    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review("lossy.example.com/v1beta1", vec![hub.clone()]),
        )
        .await;
    let resp = response(&body);
    assert_eq!(resp["result"]["status"], "Success", "{body}");
    let old = &resp["convertedObjects"][0];
    // The color the old version cannot hold is in an annotation; the rest
    // of the metadata is as sent.
    assert_eq!(old["metadata"]["annotations"][COLOR], "red", "{body}");
    assert_eq!(old["metadata"]["someFutureField"], 1);
    assert_eq!(old["metadata"]["uid"], "5a1d");
    assert_eq!(old["spec"], json!({"teeth": 12}));

    // And back: the color is restored and the annotation gone.
    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review("lossy.example.com/v1", vec![old.clone()]),
        )
        .await;
    assert_eq!(response(&body)["convertedObjects"], json!([hub]), "{body}");

    // A conversion that changes the name is refused, naming the field.
    let (_, body) = run
        .client
        .review(
            CONVERT_PATH,
            &review("lossy.example.com/v1beta1", vec![sprocket("t", 0)]),
        )
        .await;
    let result = &response(&body)["result"];
    assert_eq!(result["status"], "Failure", "{body}");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("changed metadata.name"), "{message}");
    assert!(
        message.contains("only metadata.labels and metadata.annotations"),
        "{message}"
    );
}
