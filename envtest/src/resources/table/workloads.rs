//! Columns and cells of the workload, coordination, RBAC and extension
//! kinds, as the API server prints them for `kubectl get`: deployments,
//! replica sets, stateful sets, daemon sets, controller revisions, jobs,
//! cron jobs, leases, roles and bindings, and CRDs.

use super::format::{at, containers_and_images, int, labels, list, or_none, selector, since, text};
use super::{AGE, NAME, Printer, col, wide};
use jiff::Timestamp;
use serde_json::{Value, json};

const CONTAINERS: super::Column = wide("Containers", "Names of each container in the template.");
const IMAGES: super::Column = wide(
    "Images",
    "Images referenced by each container in the template.",
);
const SELECTOR: super::Column = wide(
    "Selector",
    "The label selector of the pods this object manages.",
);

fn name(v: &Value) -> Value {
    json!(text(v, "metadata.name"))
}

fn age(v: &Value, now: Timestamp) -> Value {
    json!(since(text(v, "metadata.creationTimestamp"), now))
}

/// The containers, images and selector cells of an object with a pod
/// template at `spec.template`.
fn template_cells(v: &Value, with_selector: bool) -> Vec<Value> {
    let (containers, images) = containers_and_images(at(v, "spec.template.spec"));
    let mut out = vec![json!(containers), json!(images)];
    if with_selector {
        out.push(json!(selector(at(v, "spec.selector"))));
    }
    out
}

/// Deployments: NAME READY UP-TO-DATE AVAILABLE AGE; wide: CONTAINERS
/// IMAGES SELECTOR.
pub const DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        ),
        col(
            "Available",
            "string",
            "Total number of available non-terminating pods targeted by this deployment.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |v, now| {
        let mut cells = vec![
            name(v),
            json!(format!(
                "{}/{}",
                int(v, "status.readyReplicas", 0),
                int(v, "spec.replicas", 1)
            )),
            json!(int(v, "status.updatedReplicas", 0)),
            json!(int(v, "status.availableReplicas", 0)),
            age(v, now),
        ];
        cells.extend(template_cells(v, true));
        cells
    },
};

/// ReplicaSets: NAME DESIRED CURRENT READY AGE; wide: CONTAINERS IMAGES
/// SELECTOR.
pub const REPLICA_SET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "Replicas is the number of desired pods.",
        ),
        col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of non-terminating pods.",
        ),
        col(
            "Ready",
            "integer",
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |v, now| {
        let mut cells = vec![
            name(v),
            json!(int(v, "spec.replicas", 1)),
            json!(int(v, "status.replicas", 0)),
            json!(int(v, "status.readyReplicas", 0)),
            age(v, now),
        ];
        cells.extend(template_cells(v, true));
        cells
    },
};

/// StatefulSets: NAME READY AGE; wide: CONTAINERS IMAGES.
pub const STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    cells: |v, now| {
        let mut cells = vec![
            name(v),
            json!(format!(
                "{}/{}",
                int(v, "status.readyReplicas", 0),
                int(v, "spec.replicas", 1)
            )),
            age(v, now),
        ];
        cells.extend(template_cells(v, false));
        cells
    },
};

/// DaemonSets: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE
/// SELECTOR AGE; wide: CONTAINERS IMAGES SELECTOR.
pub const DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "The total number of nodes that should be running the daemon pod.",
        ),
        col(
            "Current",
            "integer",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        col(
            "Ready",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        col(
            "Up-to-date",
            "integer",
            "The total number of nodes that are running updated daemon pod.",
        ),
        col(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        col(
            "Node Selector",
            "string",
            "The node labels the daemon pods are restricted to.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |v, now| {
        let mut cells = vec![
            name(v),
            json!(int(v, "status.desiredNumberScheduled", 0)),
            json!(int(v, "status.currentNumberScheduled", 0)),
            json!(int(v, "status.numberReady", 0)),
            json!(int(v, "status.updatedNumberScheduled", 0)),
            json!(int(v, "status.numberAvailable", 0)),
            json!(labels(at(v, "spec.template.spec.nodeSelector"))),
            age(v, now),
        ];
        cells.extend(template_cells(v, true));
        cells
    },
};

/// ControllerRevisions: NAME CONTROLLER REVISION AGE.
pub const CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        NAME,
        col("Controller", "string", "Controller of the object"),
        col(
            "Revision",
            "string",
            "Revision indicates the revision of the state represented by Data.",
        ),
        AGE,
    ],
    cells: |v, now| {
        let owner = list(v, "metadata.ownerReferences")
            .iter()
            .find(|o| at(o, "controller") == Some(&json!(true)));
        let controller = owner.map_or("<none>".to_string(), |o| {
            let api_version = text(o, "apiVersion");
            let kind = text(o, "kind").to_lowercase();
            match api_version.split_once('/') {
                Some((group, _)) => format!("{kind}.{group}/{}", text(o, "name")),
                None => format!("{kind}/{}", text(o, "name")),
            }
        });
        vec![
            name(v),
            json!(controller),
            json!(int(v, "revision", 0)),
            age(v, now),
        ]
    },
};

/// Jobs: NAME STATUS COMPLETIONS DURATION AGE; wide: CONTAINERS IMAGES
/// SELECTOR.
pub const JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Status of the job."),
        col(
            "Completions",
            "string",
            "The number of pods which reached phase Succeeded.",
        ),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: job,
};

fn has_condition(v: &Value, ty: &str) -> bool {
    list(v, "status.conditions")
        .iter()
        .any(|c| text(c, "type") == ty && text(c, "status") == "True")
}

fn job(v: &Value, now: Timestamp) -> Vec<Value> {
    let status = if has_condition(v, "Complete") {
        "Complete"
    } else if has_condition(v, "Failed") {
        "Failed"
    } else if at(v, "metadata.deletionTimestamp").is_some() {
        "Terminating"
    } else if has_condition(v, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(v, "Suspended") {
        "Suspended"
    } else if has_condition(v, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = int(v, "status.succeeded", 0);
    let completions = match (at(v, "spec.completions"), int(v, "spec.parallelism", 0)) {
        (Some(c), _) => format!("{succeeded}/{}", c.as_i64().unwrap_or(0)),
        (None, p) if p > 1 => format!("{succeeded}/1 of {p}"),
        (None, _) => format!("{succeeded}/1"),
    };
    let start = text(v, "status.startTime");
    let duration = match (start, text(v, "status.completionTime")) {
        ("", _) => String::new(),
        (s, "") => since(s, now),
        (s, end) => super::format::seconds_between(s, end)
            .map(super::format::human_duration)
            .unwrap_or_default(),
    };
    let mut cells = vec![
        name(v),
        json!(status),
        json!(completions),
        json!(duration),
        age(v, now),
    ];
    cells.extend(template_cells(v, true));
    cells
}

/// CronJobs: NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE; wide:
/// CONTAINERS IMAGES SELECTOR.
pub const CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Schedule", "string", "The schedule in Cron format."),
        col(
            "Timezone",
            "string",
            "The time zone name for the given schedule.",
        ),
        col(
            "Suspend",
            "boolean",
            "Whether subsequent executions are suspended.",
        ),
        col("Active", "integer", "The number of currently running jobs."),
        col(
            "Last Schedule",
            "string",
            "When the job was last successfully scheduled.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |v, now| {
        let (containers, images) =
            containers_and_images(at(v, "spec.jobTemplate.spec.template.spec"));
        let suspend = match at(v, "spec.suspend").and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last = match text(v, "status.lastScheduleTime") {
            "" => "<none>".to_string(),
            t => since(t, now),
        };
        vec![
            name(v),
            json!(text(v, "spec.schedule")),
            json!(or_none(text(v, "spec.timeZone"))),
            json!(suspend),
            json!(list(v, "status.active").len()),
            json!(last),
            age(v, now),
            json!(containers),
            json!(images),
            json!(selector(at(v, "spec.jobTemplate.spec.selector"))),
        ]
    },
};

/// Leases: NAME HOLDER AGE.
pub const LEASE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Holder",
            "string",
            "The identity of the holder of a current lease.",
        ),
        AGE,
    ],
    cells: |v, now| vec![name(v), json!(text(v, "spec.holderIdentity")), age(v, now)],
};

/// The `Created At` column of kinds printed with their creation time.
const CREATED_AT: super::Column = col(
    "Created At",
    "date",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// Roles, ClusterRoles and CRDs: NAME CREATED AT (an RFC 3339 time).
pub const CREATED: Printer = Printer {
    columns: &[NAME, CREATED_AT],
    cells: |v, _| vec![name(v), json!(text(v, "metadata.creationTimestamp"))],
};

/// RoleBindings and ClusterRoleBindings: NAME ROLE AGE; wide: USERS GROUPS
/// SERVICEACCOUNTS.
pub const BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Role",
            "string",
            "The role this binding grants, as Kind/name.",
        ),
        AGE,
        wide("Users", "Users in the binding"),
        wide("Groups", "Groups in the binding"),
        wide("ServiceAccounts", "ServiceAccounts in the binding"),
    ],
    cells: |v, now| {
        let subjects = list(v, "subjects");
        let of = |kind: &str| {
            subjects
                .iter()
                .filter(|s| text(s, "kind") == kind)
                .map(|s| match kind {
                    "ServiceAccount" => format!("{}/{}", text(s, "namespace"), text(s, "name")),
                    _ => text(s, "name").to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            name(v),
            json!(format!(
                "{}/{}",
                text(v, "roleRef.kind"),
                text(v, "roleRef.name")
            )),
            age(v, now),
            json!(of("User")),
            json!(of("Group")),
            json!(of("ServiceAccount")),
        ]
    },
};
