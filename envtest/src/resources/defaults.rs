//! Defaulting of built-in kinds, as the API server does on every write:
//! the fields a real cluster fills in (a Pod's `restartPolicy`, a
//! container's `imagePullPolicy`, a Deployment's `strategy`, a Service's
//! `clusterIP` and `targetPort`, ...). Without them a controller that
//! compares what it wants with what it reads passes against a fake and
//! loops forever against a cluster. Defaults only fill missing fields, so
//! applying them twice changes nothing.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU32, Ordering};

/// Hands out ClusterIPs from 10.96.0.0/12 (skipping .0 and the first address).
#[derive(Debug, Default)]
pub struct IpAllocator(AtomicU32);

impl IpAllocator {
    fn next(&self) -> String {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 10;
        let base: u32 = (10 << 24) | (96 << 16);
        let ip = base + (n % (1 << 20));
        format!(
            "{}.{}.{}.{}",
            ip >> 24,
            (ip >> 16) & 255,
            (ip >> 8) & 255,
            ip & 255
        )
    }
}

/// Set `key` unless it holds a value: missing, `null`, `""` and `{}` count
/// as unset, as Go's defaulting tests a string for `""` and a struct's
/// fields (Go's JSON form writes absent non-pointer structs as `{}`).
fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut() {
        let unset = match m.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(_) => false,
        };
        if unset {
            m.insert(key.to_string(), value);
        }
    }
}

fn container(c: &mut Value) {
    let image = c["image"].as_str().unwrap_or("");
    let last = image.rsplit('/').next().unwrap_or("");
    let pinned =
        image.contains('@') || last.split_once(':').is_some_and(|(_, tag)| tag != "latest");
    set_default(
        c,
        "imagePullPolicy",
        json!(if pinned { "IfNotPresent" } else { "Always" }),
    );
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    // `get_mut`, not indexing: indexing a missing key stores `null`.
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        // `get_mut`, not indexing: indexing would store `"initContainers": null`.
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container);
        }
    }
}

fn template(spec: &mut Value) {
    if let Some(t) = spec.get_mut("template")
        && let Some(ps) = t.get_mut("spec")
    {
        pod_spec(ps);
    }
}

fn qos(spec: &Value) -> &'static str {
    let cs = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has = |c: &Value, k: &str| c["resources"][k].as_object().is_some_and(|m| !m.is_empty());
    if cs.iter().all(|c| !has(c, "requests") && !has(c, "limits")) {
        "BestEffort"
    } else if cs.iter().all(|c| {
        has(c, "limits")
            && (c["resources"]["requests"].is_null()
                || c["resources"]["requests"] == c["resources"]["limits"])
    }) {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `matchPolicy`, selectors and rule scopes of webhooks and policies.
fn match_defaults(m: &mut Value, rules: &str) {
    set_default(m, "matchPolicy", json!("Equivalent"));
    set_default(m, "namespaceSelector", json!({}));
    set_default(m, "objectSelector", json!({}));
    if let Some(rs) = m.get_mut(rules).and_then(Value::as_array_mut) {
        for r in rs {
            set_default(r, "scope", json!("*"));
        }
    }
}

/// What a cluster fills in on admission configurations: per webhook
/// `failurePolicy: Fail`, `matchPolicy: Equivalent`, empty selectors,
/// `timeoutSeconds: 10`, rule `scope: "*"` (and `reinvocationPolicy:
/// Never` for mutating ones); on policies `failurePolicy: Fail` and the
/// same match defaults.
fn admission(plural: &str, obj: &mut Value) {
    match plural {
        "validatingwebhookconfigurations" | "mutatingwebhookconfigurations" => {
            let hooks = obj.get_mut("webhooks").and_then(Value::as_array_mut);
            for h in hooks.into_iter().flatten() {
                set_default(h, "failurePolicy", json!("Fail"));
                set_default(h, "timeoutSeconds", json!(10));
                match_defaults(h, "rules");
                if plural == "mutatingwebhookconfigurations" {
                    set_default(h, "reinvocationPolicy", json!("Never"));
                }
            }
        }
        "validatingadmissionpolicies" => {
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                set_default(spec, "failurePolicy", json!("Fail"));
                if let Some(m) = spec.get_mut("matchConstraints").filter(|m| m.is_object()) {
                    match_defaults(m, "resourceRules");
                }
            }
        }
        "validatingadmissionpolicybindings" => {
            if let Some(m) = obj
                .get_mut("spec")
                .and_then(|s| s.get_mut("matchResources"))
                .filter(|m| m.is_object())
            {
                match_defaults(m, "resourceRules");
            }
        }
        _ => {}
    }
}

/// Fill in defaults for a built-in object of `group`/`plural` (`create`
/// also sets the initial status a real cluster reports), then give it the
/// form Go's `encoding/json` writes for it (see [`go_form`]).
pub fn apply(group: &str, plural: &str, obj: &mut Value, create: bool, ips: &IpAllocator) {
    fill(group, plural, obj, create, ips);
    go_form(obj);
}

/// The form kube-apiserver serves a built-in object in, from the Go facts
/// of its kind (`informer_codec::facts`): what Go's `omitempty` drops is
/// dropped (empty lists and maps, `""`, `0`, `false` of non-pointer
/// fields, nil pointers, zero times), and what Go always writes is there
/// (non-pointer structs such as a new Deployment's `"status": {}`).
/// Kinds without facts are left alone. Every stored built-in object goes
/// through it, so GET, LIST and WATCH agree.
pub fn go_form(obj: &mut Value) {
    informer_codec::facts::normalize_json(obj);
}

fn fill(group: &str, plural: &str, obj: &mut Value, create: bool, ips: &IpAllocator) {
    if group == "admissionregistration.k8s.io" {
        admission(plural, obj);
        return;
    }
    let Some(spec) = obj.get_mut("spec") else {
        if group.is_empty() && plural == "secrets" {
            set_default(obj, "type", json!("Opaque"));
        }
        return;
    };
    match (group, plural) {
        ("", "pods") => {
            pod_spec(spec);
            // A Pod's own default (Go's `SetDefaults_Pod`), not a pod spec's:
            // workload templates do not get it.
            set_default(spec, "enableServiceLinks", json!(true));
            if create {
                let q = qos(spec);
                obj["status"] = json!({"phase": "Pending", "qosClass": q});
            }
        }
        ("apps", "deployments") => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            set_default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            template(spec);
        }
        ("apps", "replicasets") => {
            set_default(spec, "replicas", json!(1));
            template(spec);
        }
        ("apps", "statefulsets") => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            template(spec);
        }
        ("apps", "daemonsets") => {
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            template(spec);
        }
        ("batch", "jobs") => {
            set_default(spec, "parallelism", json!(1));
            set_default(spec, "completions", json!(1));
            set_default(spec, "backoffLimit", json!(6));
            set_default(spec, "completionMode", json!("NonIndexed"));
            set_default(spec, "suspend", json!(false));
            template(spec);
        }
        ("", "services") => {
            set_default(spec, "type", json!("ClusterIP"));
            set_default(spec, "sessionAffinity", json!("None"));
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports {
                    set_default(p, "protocol", json!("TCP"));
                    let port = p["port"].clone();
                    set_default(p, "targetPort", port);
                }
            }
            if spec["type"] != "ExternalName" && spec.get("clusterIP").is_none_or(Value::is_null) {
                spec["clusterIP"] = json!(ips.next());
            }
            if let Some(ip) = spec["clusterIP"]
                .as_str()
                .filter(|ip| *ip != "None")
                .map(str::to_string)
            {
                set_default(spec, "clusterIPs", json!([ip]));
                set_default(spec, "ipFamilies", json!(["IPv4"]));
                set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
            }
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        ("", "namespaces") => set_default(spec, "finalizers", json!(["kubernetes"])),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_cluster_defaults_once() {
        let ips = IpAllocator::default();
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "reg:5000/app:1.2"}]}});
        apply("", "pods", &mut pod, true, &ips);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["qosClass"], "BestEffort");
        let again = {
            let mut p = pod.clone();
            apply("", "pods", &mut p, false, &ips);
            p
        };
        assert_eq!(again, pod, "defaulting is idempotent");
    }

    #[test]
    fn services_get_an_ip_and_target_ports() {
        let ips = IpAllocator::default();
        let mut a = json!({"spec": {"ports": [{"port": 80}]}});
        let mut b = json!({"spec": {"ports": [{"port": 80}]}});
        apply("", "services", &mut a, true, &ips);
        apply("", "services", &mut b, true, &ips);
        assert_eq!(a["spec"]["ports"][0]["targetPort"], 80);
        assert_ne!(a["spec"]["clusterIP"], b["spec"]["clusterIP"]);
        assert!(
            a["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.96.")
        );
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        apply("", "services", &mut headless, true, &ips);
        assert_eq!(headless["spec"]["clusterIP"], "None");
    }

    fn nulls(v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(path: String, v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Null => out.push(path),
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .for_each(|(i, x)| walk(format!("{path}[{i}]"), x, out)),
                Value::Object(m) => m
                    .iter()
                    .for_each(|(k, x)| walk(format!("{path}.{k}"), x, out)),
                _ => {}
            }
        }
        walk(String::new(), v, &mut out);
        out
    }

    #[test]
    fn defaults_write_no_nulls_where_there_are_no_ports() {
        let ips = IpAllocator::default();
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "nginx"}]}});
        apply("", "pods", &mut pod, true, &ips);
        let mut deploy = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "nginx"}]}}}});
        apply("apps", "deployments", &mut deploy, true, &ips);
        let mut svc = json!({"spec": {"selector": {"app": "a"}}});
        apply("", "services", &mut svc, true, &ips);
        assert_eq!(pod["spec"]["enableServiceLinks"], true);
        let template = &deploy["spec"]["template"]["spec"];
        assert!(template.get("enableServiceLinks").is_none(), "{template}");
        for v in [&pod, &deploy, &svc] {
            assert_eq!(nulls(v), Vec::<String>::new(), "{v}");
        }
        assert!(pod["spec"]["containers"][0].get("ports").is_none());
        assert!(svc["spec"].get("ports").is_none());
    }

    #[test]
    fn empty_structs_and_strings_count_as_unset() {
        let ips = IpAllocator::default();
        let mut d = json!({"spec": {"strategy": {}, "template": {"spec": {"restartPolicy": "",
            "containers": [{"name": "a", "image": "nginx"}]}}}});
        apply("apps", "deployments", &mut d, true, &ips);
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut kept = json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}});
        apply("apps", "deployments", &mut kept, true, &ips);
        assert_eq!(kept["spec"]["replicas"], 0);
        assert_eq!(kept["spec"]["strategy"], json!({"type": "Recreate"}));
    }
}
