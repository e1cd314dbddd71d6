//! The reflector's small public surface: a store shared behind an `Arc`
//! forwards every call, paged replace included, and `ReflectorError`
//! answers what lies underneath and whether it was a 410.

use std::sync::{Arc, Mutex};

use super::*;

/// Records every call, and takes lists page by page.
#[derive(Default)]
struct Calls(Mutex<Vec<String>>);

impl Calls {
    fn log(&self, call: String) {
        self.0.lock().unwrap().push(call);
    }
    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl ReflectorStore<String> for Calls {
    fn add(&self, obj: String) {
        self.log(format!("add {obj}"));
    }
    fn update(&self, obj: String) {
        self.log(format!("update {obj}"));
    }
    fn delete(&self, obj: String) {
        self.log(format!("delete {obj}"));
    }
    fn replace(&self, list: Vec<String>, rv: &str) {
        self.log(format!("replace {list:?} {rv}"));
    }
    fn resync(&self) {
        self.log("resync".into());
    }
    fn prepare_listed(&self, obj: String) -> String {
        obj.to_uppercase()
    }
    fn replace_prepared(&self, list: Vec<String>, rv: &str) {
        self.log(format!("replace_prepared {list:?} {rv}"));
    }
    fn replaces_by_page(&self) -> bool {
        true
    }
    fn replace_begin(&self) {
        self.log("begin".into());
    }
    fn replace_page(&self, page: Vec<String>) {
        self.log(format!("page {page:?}"));
    }
    fn replace_finish(&self, rv: &str) {
        self.log(format!("finish {rv}"));
    }
}

#[test]
fn a_store_behind_an_arc_forwards_every_call() {
    let inner = Arc::new(Calls::default());
    let shared: Arc<Arc<Calls>> = Arc::new(inner.clone());
    let store: &dyn ReflectorStore<String> = &shared;
    assert!(store.replaces_by_page());
    assert_eq!(store.prepare_listed("a".into()), "A");
    store.replace_begin();
    store.replace_page(vec!["A".into()]);
    store.replace_finish("7");
    store.replace_prepared(vec!["B".into()], "8");
    store.add("c".into());
    store.update("c".into());
    store.delete("c".into());
    store.replace(vec![], "9");
    store.resync();
    assert_eq!(
        inner.taken(),
        [
            "begin",
            "page [\"A\"]",
            "finish 7",
            "replace_prepared [\"B\"] 8",
            "add c",
            "update c",
            "delete c",
            "replace [] 9",
            "resync",
        ]
    );
}

#[test]
fn reflector_errors_name_what_lies_underneath() {
    let gone = ReflectorError::List {
        informer: "pods".into(),
        source: api_err(410, "Expired"),
    };
    assert!(gone.is_expired());
    assert!(
        gone.list_watch_error()
            .is_some_and(ListWatchError::is_expired)
    );
    let busy = ReflectorError::Watch {
        informer: "pods".into(),
        source: api_err(500, "InternalError"),
    };
    assert!(!busy.is_expired());
    assert_eq!(
        busy.list_watch_error().and_then(ListWatchError::code),
        Some(500)
    );
    let cut = ReflectorError::StreamingListIncomplete {
        informer: "pods".into(),
        events: 3,
    };
    assert!(cut.list_watch_error().is_none());
    assert!(!cut.is_expired());
}

#[tokio::test(start_paused = true)]
async fn a_reflector_shows_its_name_and_last_synced_version() {
    let bump = Bump::new();
    let lw = FakeLw::new(&bump, vec![]);
    let store = RecordingStore::new(&bump);
    let reflector = Reflector::builder(lw, store).name("pods").build();
    assert_eq!(reflector.name(), "pods");
    assert_eq!(
        reflector.last_sync_resource_version(),
        None,
        "before any list"
    );
    reflector.synced.set("42");
    assert_eq!(
        reflector.last_sync_resource_version().as_deref(),
        Some("42")
    );
    let shown = format!("{reflector:?}");
    assert!(
        shown.contains("\"pods\"") && shown.contains("\"42\""),
        "{shown}"
    );
}
