//! A derived kind through `SharedInformerFactory`, the generated typed
//! lister (with a declared index) and the generated typed handler, against
//! envtest.

use std::sync::Arc;
use std::time::Duration;

use ::envtest::TestEnv;
use controller_runtime::informer_core::factory::SharedInformerFactory;
use controller_runtime::informer_core::key::ObjectOrTombstone;
use controller_runtime::informer_core::selector::LabelSelector;
use kube_client::api::{Api, DeleteParams, PostParams};
use tokio::sync::mpsc;

use crate::envtest::install;
use crate::types::{Foo, FooHandler, FooLister, FooSpec};

const LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug, PartialEq)]
enum Seen {
    Added(String, Option<i32>),
    Updated(Option<i32>, Option<i32>),
    Deleted(String),
}

struct Recorder(mpsc::UnboundedSender<Seen>);

impl FooHandler for Recorder {
    fn on_add(&self, obj: Arc<Foo>, _initial: bool) {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let _ = self.0.send(Seen::Added(name, obj.spec.replicas));
    }
    fn on_update(&self, old: Arc<Foo>, new: Arc<Foo>) {
        let _ = self
            .0
            .send(Seen::Updated(old.spec.replicas, new.spec.replicas));
    }
    fn on_delete(&self, obj: ObjectOrTombstone<Foo>) {
        let name = obj.object().metadata.name.clone().unwrap_or_default();
        let _ = self.0.send(Seen::Deleted(name));
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(LIMIT, rx.recv())
        .await
        .expect("no event in time")
        .expect("channel closed")
}

fn spec(deployment: &str, replicas: i32) -> FooSpec {
    FooSpec {
        deployment_name: deployment.into(),
        replicas: Some(replicas),
    }
}

#[tokio::test]
async fn derived_kind_runs_through_factory_typed_lister_and_typed_handler() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, &Foo::crd().unwrap()).await;
    let api: Api<Foo> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &Foo::new("a", spec("web", 1)))
        .await
        .unwrap();

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.informer::<Foo>();
    informer.add_indexers(Foo::indexers()).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    informer
        .add_event_handler(Foo::handler(Recorder(tx)))
        .unwrap();
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Added("a".into(), Some(1)));

    let lister = FooLister::from(factory.lister::<Foo>());
    assert_eq!(
        lister.foos("default").get("a").unwrap().spec,
        spec("web", 1)
    );
    assert!(lister.foos("other").get("a").is_none());

    api.create(&PostParams::default(), &Foo::new("b", spec("db", 2)))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, Seen::Added("b".into(), Some(2)));
    assert_eq!(lister.list(&LabelSelector::everything()).len(), 2);
    let by_web = lister.by_deployment("web").unwrap();
    assert_eq!(by_web.len(), 1);
    assert_eq!(by_web[0].metadata.name.as_deref(), Some("a"));

    let mut b = api.get("b").await.unwrap();
    b.spec.replicas = Some(5);
    b.spec.deployment_name = "web".into();
    api.replace("b", &PostParams::default(), &b).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Updated(Some(2), Some(5)));
    assert_eq!(
        lister.by_deployment("web").unwrap().len(),
        2,
        "the index follows updates"
    );
    assert!(lister.by_deployment("db").unwrap().is_empty());

    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Deleted("a".into()));
    assert!(lister.foos("default").get("a").is_none());
    factory.shutdown().await;
}

#[test]
fn cluster_scoped_lister_gets_by_name_and_uses_function_indexes() {
    use crate::types::{Gadget, GadgetLister, GadgetSpec};
    use controller_runtime::informer_core::lister::Lister;
    use controller_runtime::informer_core::store::Indexer;

    let indexer = Indexer::<Gadget>::new();
    indexer.add_indexers(Gadget::indexers()).unwrap();
    for (name, size) in [("small", 1), ("also-small", 1), ("big", 9)] {
        indexer
            .add(Arc::new(Gadget::new(name, GadgetSpec { size })))
            .unwrap();
    }
    let lister = GadgetLister::new(Lister::new(indexer));
    assert_eq!(lister.get("big").unwrap().spec.size, 9);
    assert!(lister.get("huge").is_none());
    assert_eq!(lister.by_size("1").unwrap().len(), 2);
    assert!(lister.by_size("2").unwrap().is_empty());
}
