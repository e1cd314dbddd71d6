//! kube-rs's watcher over metadata-only answers (`Api<PartialObjectMeta<K>>`,
//! which asks for `as=PartialObjectMetadataList` lists and
//! `as=PartialObjectMetadata` watches) against envtest: the state it builds
//! from its events converges to the server's after a few hundred writes,
//! with the list-then-watch strategy and with streaming lists.

use crate::{WAIT, cm};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube_runtime::watcher::{self, Event};
use std::collections::BTreeMap;
use tokio::sync::watch;

type State = BTreeMap<String, String>;

/// Run a watcher and publish the name -> resourceVersion map its events build.
fn follow(
    api: Api<PartialObjectMeta<ConfigMap>>,
    config: watcher::Config,
) -> watch::Receiver<State> {
    let (tx, rx) = watch::channel(State::new());
    tokio::spawn(async move {
        let mut state = State::new();
        let mut init = State::new();
        let mut stream = watcher::watcher(api, config).boxed();
        while let Some(ev) = stream.next().await {
            let key = |m: &PartialObjectMeta<ConfigMap>| {
                (
                    m.metadata.name.clone().unwrap_or_default(),
                    m.metadata.resource_version.clone().unwrap_or_default(),
                )
            };
            match ev {
                Ok(Event::Apply(m)) => {
                    let (k, rv) = key(&m);
                    state.insert(k, rv);
                }
                Ok(Event::Delete(m)) => {
                    state.remove(&key(&m).0);
                }
                Ok(Event::Init) => init.clear(),
                Ok(Event::InitApply(m)) => {
                    let (k, rv) = key(&m);
                    init.insert(k, rv);
                }
                Ok(Event::InitDone) => state = std::mem::take(&mut init),
                Err(e) => panic!("watcher error: {e}"),
            }
            if tx.send(state.clone()).is_err() {
                return;
            }
        }
    });
    rx
}

#[tokio::test]
async fn kube_runtime_metadata_watchers_converge_over_hundreds_of_writes() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..40 {
        cms.create(&PostParams::default(), &cm(&format!("seed-{i}"), &[], "s"))
            .await
            .unwrap();
    }
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(client.clone());
    let mut listed = follow(metas.clone(), watcher::Config::default().page_size(7));
    let mut streamed = follow(metas, watcher::Config::default().streaming_lists());

    // 300 writes: creates, label patches and deletes, interleaved.
    let writes = &cms;
    let mut n = 0;
    for round in 0..100 {
        let name = format!("w-{round}");
        writes
            .create(&PostParams::default(), &cm(&name, &[], "x"))
            .await
            .unwrap();
        let patch = serde_json::json!({"metadata": {"labels": {"round": round.to_string()}}});
        let target = format!("seed-{}", round % 40);
        writes
            .patch(&target, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        if round % 2 == 0 {
            writes.delete(&name, &Default::default()).await.unwrap();
        } else {
            writes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
        n += 3;
    }
    assert_eq!(n, 300);

    let want: State = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
            )
        })
        .collect();
    assert_eq!(want.len(), 40 + 50);
    for (what, rx) in [
        ("list-watch", &mut listed),
        ("streaming list", &mut streamed),
    ] {
        tokio::time::timeout(WAIT, rx.wait_for(|s| *s == want))
            .await
            .unwrap_or_else(|_| panic!("{what}: the watcher did not converge"))
            .unwrap();
    }
}
