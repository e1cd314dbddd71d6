//! A seeded schedule: the workload and the faults of one run, decided up
//! front from the seed so a failing run can be printed and replayed.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How many widget names a run draws from.
pub const NAMES: usize = 6;

/// One step of a run, executed in order by the driver.
#[derive(Debug, Clone)]
pub enum Step {
    /// Create widget `name` (if absent) with `value`; its first
    /// `fail_times` reconciles fail and the `panic_times` before them panic.
    Create {
        name: usize,
        value: u32,
        fail_times: usize,
        panic_times: usize,
    },
    /// Set widget `name`'s data to `value`.
    Update { name: usize, value: u32 },
    /// Delete widget `name`.
    Delete { name: usize },
    /// Overwrite the ConfigMap the controller owns for `name` (drift the
    /// controller must repair).
    TamperConfigMap { name: usize },
    /// Inject a fault.
    Fault(Fault),
    /// Let the system run for a while.
    Pause { ms: u64 },
}

/// A fault injected through envtest.
#[derive(Debug, Clone)]
pub enum Fault {
    /// End every open watch.
    DropWatches,
    /// Forget history: resumes get 410 Gone and relist.
    Compact,
    /// The next `count` requests (watches, lists, or any) answer `status`.
    Burst {
        status: u16,
        count: usize,
        target: Target,
    },
    /// The next `count` ConfigMap writes answer 409 Conflict.
    WriteConflicts { count: usize },
    /// Every request waits `ms` for the next `for_ms`.
    Latency { ms: u64, for_ms: u64 },
    /// The server answers nothing for `ms`.
    ServerPause { ms: u64 },
}

/// Which requests a burst hits.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Watches,
    Lists,
    Any,
}

impl Fault {
    /// A short name for counting faults by kind.
    pub fn kind(&self) -> String {
        match self {
            Fault::DropWatches => "drop watches".into(),
            Fault::Compact => "compaction (410 on resume)".into(),
            Fault::Burst { status, .. } => format!("{status} burst"),
            Fault::WriteConflicts { .. } => "409 on ConfigMap writes".into(),
            Fault::Latency { .. } => "latency".into(),
            Fault::ServerPause { .. } => "server pause".into(),
        }
    }
}

/// Everything one seed decides.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub seed: u64,
    /// Extra time each reconcile takes.
    pub reconcile_ms: u64,
    /// Every n-th notification to the panicking handler panics (0: never).
    pub handler_panic_every: usize,
    pub steps: Vec<Step>,
}

impl Schedule {
    /// The schedule of `seed`: 12 to 24 steps, about one in three a fault.
    pub fn from_seed(seed: u64) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let len: u32 = rng.random_range(12..=24);
        let mut steps = Vec::new();
        for value in 1..=len {
            let name = rng.random_range(0..NAMES);
            let step = match rng.random_range(0..100) {
                0..30 => Step::Create {
                    name,
                    value,
                    fail_times: if rng.random_bool(0.2) {
                        rng.random_range(1..=2)
                    } else {
                        0
                    },
                    panic_times: usize::from(rng.random_bool(0.15)),
                },
                30..50 => Step::Update { name, value },
                50..58 => Step::Delete { name },
                58..63 => Step::TamperConfigMap { name },
                63..70 => Step::Pause {
                    ms: rng.random_range(5..60),
                },
                _ => Step::Fault(random_fault(&mut rng)),
            };
            steps.push(step);
        }
        Schedule {
            seed,
            reconcile_ms: rng.random_range(0..20),
            handler_panic_every: if rng.random_bool(0.5) {
                rng.random_range(2..6)
            } else {
                0
            },
            steps,
        }
    }
}

fn random_fault(rng: &mut StdRng) -> Fault {
    match rng.random_range(0..7) {
        0 => Fault::DropWatches,
        1 => Fault::Compact,
        2 | 3 => Fault::Burst {
            status: [500, 429, 504][rng.random_range(0..3)],
            count: rng.random_range(1..=3),
            target: [Target::Watches, Target::Lists, Target::Any][rng.random_range(0..3)],
        },
        4 => Fault::WriteConflicts {
            count: rng.random_range(1..=3),
        },
        5 => Fault::Latency {
            ms: rng.random_range(5..40),
            for_ms: rng.random_range(50..200),
        },
        _ => Fault::ServerPause {
            ms: rng.random_range(20..150),
        },
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} (reconcile {} ms, handler panics every {}):",
            self.seed, self.reconcile_ms, self.handler_panic_every
        )?;
        for (i, step) in self.steps.iter().enumerate() {
            writeln!(f, "  {i:2}: {step:?}")?;
        }
        Ok(())
    }
}
