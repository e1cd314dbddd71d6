//! Turns the bench's JSON records into `performance.md`: the fixed prose
//! from `xtask/templates/performance/`, the targets with whether each is
//! met, and per scenario a table (median and min-max of every run, ratios to
//! kube-runtime and to the floor) and a plot.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod fleet;
mod protobuf;
mod recovery;
mod webhook;

/// The sides, in column order.
pub const SIDES: [&str; 3] = ["informer-rs", "kube-runtime", "floor"];

/// Scenario ids, titles and their prose, in report order.
const SCENARIOS: [(&str, &str, &str); 12] = [
    (
        "sync",
        "1. Initial sync",
        include_str!("../../templates/performance/sync.md"),
    ),
    (
        "relist",
        "2. Relist",
        include_str!("../../templates/performance/relist.md"),
    ),
    (
        "watch",
        "3. Watch throughput",
        include_str!("../../templates/performance/watch.md"),
    ),
    (
        "fanout",
        "4. Fan-out",
        include_str!("../../templates/performance/fanout.md"),
    ),
    (
        "indexer",
        "5. Indexer",
        include_str!("../../templates/performance/indexer.md"),
    ),
    (
        "workqueue",
        "6. Workqueue",
        include_str!("../../templates/performance/workqueue.md"),
    ),
    (
        "controller",
        "7. Controller end to end",
        include_str!("../../templates/performance/controller.md"),
    ),
    (
        "scope",
        "8. Cache scope: metadata only, streaming list",
        include_str!("../../templates/performance/scope.md"),
    ),
    (
        "webhook",
        "9. Admission webhook over TLS",
        include_str!("../../templates/performance/webhook.md"),
    ),
    (
        "sharding",
        "10. Sharding in label mode",
        include_str!("../../templates/performance/sharding.md"),
    ),
    (
        "protobuf",
        "11. Protobuf: client CPU per object",
        include_str!("../../templates/performance/protobuf.md"),
    ),
    (
        "fleet",
        "12. Fleets: one manager over many clusters",
        include_str!("../../templates/performance/fleet.md"),
    ),
];
const INTRO: &str = include_str!("../../templates/performance/intro.md");
const OUTRO: &str = include_str!("../../templates/performance/outro.md");
/// Where the client's CPU goes, by profile (before and after a change).
const PROFILE: &str = include_str!("../../templates/performance/profile.md");

/// The bench program's output.
#[derive(Debug, Deserialize, Serialize)]
pub struct Session {
    quick: bool,
    runs: usize,
    cpus: usize,
    load_average: String,
    /// When the bench finished (seconds since the Unix epoch), so that a
    /// render of this file gives the same date on any later day; absent
    /// from older files (then: today).
    #[serde(default)]
    finished: Option<u64>,
    /// Whether the bench program was a release build; absent from older
    /// files (then: what the command line says).
    #[serde(default)]
    release: Option<bool>,
    /// The commit measured; absent from older files.
    #[serde(default)]
    commit: Option<String>,
    /// Scenarios measured again later and merged in (`--merge`), oldest
    /// first; their records replaced the session's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reruns: Vec<Rerun>,
    records: Vec<Record>,
}

/// One later run of some scenarios, merged into a session.
#[derive(Debug, Deserialize, Serialize)]
pub struct Rerun {
    scenarios: Vec<String>,
    runs: usize,
    cpus: usize,
    load_average: String,
    finished: Option<u64>,
    release: Option<bool>,
    commit: Option<String>,
}

impl Session {
    /// Puts the records of `later` (a run of some scenarios) in place of
    /// this session's records of those scenarios, and remembers the run.
    pub fn merge(&mut self, later: Session) -> Result<(), String> {
        if later.quick != self.quick {
            return Err("cannot merge a --quick run with a full-size one".into());
        }
        let mut scenarios: Vec<String> = later.records.iter().map(|r| r.scenario.clone()).collect();
        scenarios.sort();
        scenarios.dedup();
        if scenarios.is_empty() {
            return Err("the later run has no records to merge".into());
        }
        self.records.retain(|r| !scenarios.contains(&r.scenario));
        self.records.extend(later.records);
        self.reruns.extend(later.reruns);
        self.reruns.push(Rerun {
            scenarios,
            runs: later.runs,
            cpus: later.cpus,
            load_average: later.load_average,
            finished: later.finished,
            release: later.release,
            commit: later.commit,
        });
        Ok(())
    }
}

/// One measured quantity for one side.
#[derive(Debug, Deserialize, Serialize)]
struct Record {
    scenario: String,
    case: String,
    metric: String,
    unit: String,
    higher_is_better: bool,
    side: String,
    values: Vec<f64>,
}

/// One table row: a case and quantity with the values of every side.
#[derive(Debug)]
pub struct Row<'a> {
    /// The case.
    pub case: &'a str,
    /// The quantity.
    pub metric: &'a str,
    /// Its unit.
    pub unit: &'a str,
    higher_is_better: bool,
    /// Values per side, in [`SIDES`] order.
    pub sides: [Option<Vec<f64>>; 3],
}

impl<'a> Row<'a> {
    /// The rows of `scenario`, in the order the bench produced them.
    pub fn of(session: &'a Session, scenario: &str) -> Vec<Row<'a>> {
        let mut rows: Vec<Row<'a>> = Vec::new();
        for r in session.records.iter().filter(|r| r.scenario == scenario) {
            let Some(side) = SIDES.iter().position(|s| *s == r.side) else {
                continue;
            };
            let at = rows
                .iter()
                .position(|x| x.case == r.case && x.metric == r.metric);
            let row = match at {
                Some(i) => &mut rows[i],
                None => {
                    rows.push(Row {
                        case: &r.case,
                        metric: &r.metric,
                        unit: &r.unit,
                        higher_is_better: r.higher_is_better,
                        sides: [None, None, None],
                    });
                    let last = rows.len() - 1;
                    &mut rows[last]
                }
            };
            row.sides[side] = Some(r.values.clone());
        }
        rows
    }

    fn median(&self, side: usize) -> Option<f64> {
        self.sides[side].as_deref().map(median)
    }

    fn range(&self, side: usize) -> Option<(f64, f64)> {
        let v = self.sides[side].as_deref()?;
        Some((
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ))
    }

    /// `ours / other` with a word saying who is ahead (and whether the
    /// ranges of the runs overlap).
    fn ratio(&self, other: usize) -> String {
        let (Some(a), Some(b)) = (self.median(0), self.median(other)) else {
            return "-".into();
        };
        if b == 0.0 || !a.is_finite() || !b.is_finite() {
            return "-".into();
        }
        let r = a / b;
        let better = if self.higher_is_better {
            r > 1.0
        } else {
            r < 1.0
        };
        let overlap = match (self.range(0), self.range(other)) {
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
            _ => false,
        };
        let word = match (overlap, better) {
            (true, _) => "runs overlap",
            (false, true) => "ahead",
            (false, false) => "**behind**",
        };
        if other == 2 {
            format!("{r:.2}")
        } else {
            format!("{r:.2} ({word})")
        }
    }
}

/// The median of `xs` (NaN when empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A number with thousands separators and precision fitting its size.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        return format!("{:.2} M", v / 1e6);
    }
    if a >= 100.0 {
        let n = v.round() as i64;
        let digits = n.unsigned_abs().to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        return if n < 0 { format!("-{out}") } else { out };
    }
    if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn cell(row: &Row<'_>, side: usize) -> String {
    match (row.median(side), row.range(side)) {
        (Some(m), Some((lo, hi))) => format!("{} ({}–{})", number(m), number(lo), number(hi)),
        _ => "-".into(),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    date_of(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// The UTC date of `secs` since the Unix epoch, as YYYY-MM-DD.
fn date_of(secs: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The median of `metric` in `case` of `scenario` for `side`.
fn find(session: &Session, scenario: &str, case: &str, metric: &str, side: usize) -> Option<f64> {
    session
        .records
        .iter()
        .find(|r| {
            r.scenario == scenario && r.case == case && r.metric == metric && r.side == SIDES[side]
        })
        .map(|r| median(&r.values))
}

/// Why each target is met or missed: `key: reason` lines of the template.
const WHY: &str = include_str!("../../templates/performance/targets.md");

/// The reason the template gives for target `key` ("-" if none).
fn why(key: &str) -> &'static str {
    WHY.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(": "))
        .find(|(k, _)| k.trim() == key)
        .map_or("-", |(_, reason)| reason.trim())
}

/// The targets, each with the measured value, whether it is met
/// and why (from `templates/performance/targets.md`).
fn targets(session: &Session) -> String {
    let mut out = String::from("| target | measured | met | why |\n|---|---|---|---|\n");
    let mut line = |key: &str, target: &str, measured: String, met: Option<bool>| {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let _ = writeln!(out, "| {target} | {measured} | {met} | {} |", why(key));
    };
    let largest = session
        .records
        .iter()
        .filter(|r| r.scenario == "sync")
        .filter_map(|r| r.case.split(' ').next()?.parse::<usize>().ok())
        .max();
    if let Some(n) = largest {
        for strip in ["kept", "stripped"] {
            let case = format!("{n} objects, managedFields {strip}");
            let heap = |side| find(session, "sync", &case, "retained heap once synced", side);
            if let (Some(a), Some(b), Some(f)) = (heap(0), heap(1), heap(2)) {
                line(
                    &format!("heap-{strip}"),
                    &format!(
                        "retained heap per object ≤ kube-runtime's and ≤ 1.05 × the object's own size ({case})"
                    ),
                    format!(
                        "{} B vs kube-runtime {} B; object {} B: {:.2} ×",
                        number(a),
                        number(b),
                        number(f),
                        a / f
                    ),
                    Some(a <= b && a <= 1.05 * f),
                );
            }
            let time = |side| find(session, "sync", &case, "time to synced", side);
            if let (Some(a), Some(f)) = (time(0), time(2)) {
                line(
                    &format!("sync-{strip}"),
                    &format!("sync time ≤ 1.5 × the decode floor ({case})"),
                    format!("{} ms vs floor {} ms: {:.2} ×", number(a), number(f), a / f),
                    Some(a <= 1.5 * f),
                );
            }
        }
    }
    let update = session
        .records
        .iter()
        .filter(|r| {
            r.scenario == "controller"
                && r.metric == "update reconciles/s"
                && r.case.ends_with("8 workers")
        })
        .map(|r| r.case.as_str())
        .next();
    if let Some(case) = update {
        let rate = |side| find(session, "controller", case, "update reconciles/s", side);
        if let (Some(a), Some(b)) = (rate(0), rate(1)) {
            line(
                "update-reconciles",
                &format!("update reconciles/s ≥ 1.2 × kube-runtime's ({case})"),
                format!("{} vs {}: {:.2} ×", number(a), number(b), a / b),
                Some(a >= 1.2 * b),
            );
        }
    }
    scope_targets(session, &mut line);
    sharding_targets(session, &mut line);
    recovery::targets(session, &mut line);
    protobuf::targets(session, &mut line);
    fleet::targets(session, &mut line);
    webhook::targets(session, &mut line);
    let relist = session
        .records
        .iter()
        .filter(|r| r.scenario == "relist")
        .filter_map(|r| Some((r.case.split(' ').next()?.parse::<usize>().ok()?, &r.case)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, case)| case.as_str());
    match relist {
        Some(case) => {
            let peak = |side| find(session, "relist", case, RELIST_RATIO, side);
            if let (Some(a), Some(b)) = (peak(0), peak(1)) {
                line(
                    "relist-peak",
                    &format!("relist peak ≤ 1.5 × steady state ({case})"),
                    format!("{a:.2} × (kube-runtime {b:.2} ×)"),
                    Some(a <= 1.5),
                );
            }
        }
        None => line(
            "relist-peak",
            "relist peak ≤ 1.5 × steady state",
            "not in this session".into(),
            None,
        ),
    }
    out
}

/// The cache-scope targets: a metadata-only cache of Secrets retains at
/// most a fifth of the full one, and no more than kube-runtime's
/// `metadata_watcher` store.
fn scope_targets(session: &Session, line: &mut impl FnMut(&str, &str, String, Option<bool>)) {
    let case_of = |suffix: &str| {
        session
            .records
            .iter()
            .find(|r| r.scenario == "scope" && r.case.ends_with(suffix))
            .map(|r| r.case.clone())
    };
    let (Some(full), Some(meta)) = (
        case_of("full objects (LIST)"),
        case_of("metadata only (LIST)"),
    ) else {
        return;
    };
    let heap = |case: &str, side| find(session, "scope", case, "retained heap once synced", side);
    if let (Some(f), Some(m), Some(k)) = (heap(&full, 0), heap(&meta, 0), heap(&meta, 1)) {
        line(
            "metadata-heap",
            &format!(
                "metadata-only heap ≤ 1/5 of full and ≤ kube-runtime's metadata_watcher ({meta})"
            ),
            format!(
                "{} B vs full {} B ({:.2} ×); kube-runtime metadata_watcher {} B",
                number(m),
                number(f),
                m / f,
                number(k)
            ),
            Some(m <= f / 5.0 && m <= k),
        );
    }
}

/// The sharding targets (label mode): retained heap per replica at N
/// replicas at most 1.2/N of one replica's, and throughput at N replicas at
/// least 0.8 × N × one replica's.
fn sharding_targets(session: &Session, line: &mut impl FnMut(&str, &str, String, Option<bool>)) {
    let case_of = |n: usize| {
        session
            .records
            .iter()
            .find(|r| r.scenario == "sharding" && r.case.contains(&format!(" {n} replicas,")))
            .map(|r| r.case.clone())
    };
    let Some(one) = case_of(1) else { return };
    let at = |case: &str, metric| find(session, "sharding", case, metric, 0);
    let (Some(heap1), Some(rate1)) = (
        at(&one, "retained heap per replica"),
        at(&one, "throughput"),
    ) else {
        return;
    };
    if let Some(kube) = find(session, "sharding", &one, "throughput", 1) {
        line(
            "sharding-throughput-1",
            &format!("one replica's throughput ≥ kube-runtime's ({one})"),
            format!(
                "{} vs {} reconciles/s: {:.2} ×",
                number(rate1),
                number(kube),
                rate1 / kube
            ),
            Some(rate1 >= kube),
        );
    }
    // Run 0 labels fresh objects; every later run takes them over from the
    // replica of the run before.
    let runs = session
        .records
        .iter()
        .find(|r| {
            r.scenario == "sharding"
                && r.case == one
                && r.metric == "retained heap per replica"
                && r.side == SIDES[0]
        })
        .map(|r| r.values.as_slice());
    if let Some([fresh, takeovers @ ..]) = runs
        && !takeovers.is_empty()
    {
        let taken = median(takeovers);
        line(
            "sharding-takeover-heap",
            &format!("heap after a takeover within 5 % of a fresh labelling ({one})"),
            format!(
                "{} KiB vs {} KiB: {:.2} ×",
                number(taken),
                number(*fresh),
                taken / fresh
            ),
            Some((taken / fresh - 1.0).abs() <= 0.05),
        );
    }
    for n in [2usize, 4] {
        let Some(case) = case_of(n) else { continue };
        let nf = n as f64;
        if let Some(heap) = at(&case, "retained heap per replica") {
            line(
                &format!("sharding-heap-{n}"),
                &format!("heap per replica ≤ 1.2/{n} of one replica's ({case})"),
                format!(
                    "{} KiB vs {} KiB: {:.2} × (target ≤ {:.2} ×)",
                    number(heap),
                    number(heap1),
                    heap / heap1,
                    1.2 / nf
                ),
                Some(heap <= heap1 * 1.2 / nf),
            );
        }
        if let Some(rate) = at(&case, "throughput") {
            line(
                &format!("sharding-throughput-{n}"),
                &format!("throughput ≥ 0.8 × {n} × one replica's ({case})"),
                format!(
                    "{} vs {} reconciles/s: {:.2} × (target ≥ {:.1} ×)",
                    number(rate),
                    number(rate1),
                    rate / rate1,
                    0.8 * nf
                ),
                Some(rate >= rate1 * 0.8 * nf),
            );
        }
    }
}

/// A paragraph naming each later run merged into `session` (none: empty).
fn reruns(session: &Session, release: bool) -> String {
    let mut out = String::new();
    for r in &session.reruns {
        let titles: Vec<&str> = SCENARIOS
            .iter()
            .filter(|(id, _, _)| r.scenarios.iter().any(|s| s == id))
            .map(|(_, title, _)| *title)
            .collect();
        let _ = write!(
            out,
            "\n**Measured again later** (`cargo xtask bench --only {} --merge`), replacing this \
             session's rows: {}; {} runs per measurement, {} build of {}, {}, {} CPUs, load \
             average at the end `{}`.\n",
            r.scenarios.join(","),
            titles.join(", "),
            r.runs,
            if r.release.unwrap_or(release) {
                "release"
            } else {
                "dev (unoptimised)"
            },
            r.commit.as_ref().map_or_else(
                || "an unrecorded commit".to_owned(),
                |c| format!("commit `{c}`")
            ),
            r.finished.map_or_else(today, date_of),
            r.cpus,
            r.load_average
        );
    }
    out
}

/// The relist scenario's headline quantity (as the bench names it).
const RELIST_RATIO: &str = "peak heap during relist / steady state";

/// Writes `performance.md` and the plots into `dir`; returns the file.
/// `plot` draws one scenario's SVG (`bench::plot::scenario`; passed in, as
/// the plot reads this module's rows and must not be imported back).
pub fn write(
    session: &Session,
    dir: &Path,
    release: bool,
    plot: &dyn Fn(&Session, &str, &Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let plots = dir.join("performance");
    std::fs::create_dir_all(&plots)
        .map_err(|e| format!("cannot create {}: {e}", plots.display()))?;
    let mut md = INTRO
        .replace("{{date}}", &session.finished.map_or_else(today, date_of))
        .replace("{{runs}}", &session.runs.to_string())
        .replace("{{cpus}}", &session.cpus.to_string())
        .replace("{{load}}", &session.load_average)
        .replace(
            "{{commit}}",
            &session.commit.as_ref().map_or_else(
                || "an unrecorded commit".to_owned(),
                |c| format!("commit `{c}`"),
            ),
        )
        .replace(
            "{{profile}}",
            if session.release.unwrap_or(release) {
                "release"
            } else {
                "dev (unoptimised)"
            },
        )
        .replace(
            "{{mode}}",
            if session.quick {
                "`--quick` (small sizes)"
            } else {
                "full size"
            },
        );
    md.push_str(&reruns(session, release));
    md.push_str("\n## Targets\n\n");
    md.push_str(&targets(session));
    for (id, title, prose) in SCENARIOS {
        let rows = Row::of(session, id);
        if rows.is_empty() {
            continue;
        }
        let _ = write!(md, "\n## {title}\n\n{}\n", prose.trim());
        plot(session, id, &plots.join(format!("{id}.svg")))?;
        let _ = write!(md, "\n![{title}](performance/{id}.svg)\n\n");
        md.push_str("| case | quantity | informer-rs | kube-runtime | floor | informer-rs / kube-runtime | informer-rs / floor |\n");
        md.push_str("|---|---|---:|---:|---:|---:|---:|\n");
        for r in &rows {
            let _ = writeln!(
                md,
                "| {} | {} ({}) | {} | {} | {} | {} | {} |",
                r.case,
                r.metric,
                r.unit,
                cell(r, 0),
                cell(r, 1),
                cell(r, 2),
                r.ratio(1),
                r.ratio(2)
            );
        }
    }
    md.push('\n');
    md.push_str(PROFILE.trim());
    md.push_str("\n\n");
    md.push_str(OUTRO.trim());
    md.push('\n');
    let path = dir.join("performance.md");
    std::fs::write(&path, md).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_a_reason_in_the_template() {
        for strip in ["kept", "stripped"] {
            assert_ne!(why(&format!("heap-{strip}")), "-");
            assert_ne!(why(&format!("sync-{strip}")), "-");
        }
        assert_ne!(why("update-reconciles"), "-");
        assert_ne!(why("relist-peak"), "-");
        assert_ne!(why("metadata-heap"), "-");
        for key in protobuf::KEYS
            .iter()
            .chain(&fleet::KEYS)
            .chain(&recovery::KEYS)
            .chain(&webhook::KEYS)
        {
            assert_ne!(why(key), "-", "{key}");
        }
        assert_eq!(why("no-such-target"), "-");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(1234.4), "1,234");
        assert_eq!(number(123_456.0), "123,456");
        assert_eq!(number(2_500_000.0), "2.50 M");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(1.234), "1.23");
        assert_eq!(number(-4321.0), "-4,321");
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    fn session(records: serde_json::Value) -> Session {
        let v = serde_json::json!({"quick": true, "runs": 2, "cpus": 2, "load_average": "1.0", "records": records});
        match serde_json::from_value(v) {
            Ok(s) => s,
            Err(e) => panic!("bad test session: {e}"),
        }
    }

    fn rec(side: &str, metric: &str, higher: bool, values: &[f64]) -> serde_json::Value {
        serde_json::json!({"scenario": "s", "case": "c", "metric": metric, "unit": "u",
            "higher_is_better": higher, "side": side, "values": values})
    }

    #[test]
    fn ratios_say_who_is_ahead_by_direction() {
        let s = session(serde_json::json!([
            rec("informer-rs", "time", false, &[10.0, 11.0]),
            rec("kube-runtime", "time", false, &[20.0, 21.0]),
            rec("informer-rs", "rate", true, &[10.0, 11.0]),
            rec("kube-runtime", "rate", true, &[20.0, 21.0]),
            rec("informer-rs", "close", true, &[10.0, 12.0]),
            rec("kube-runtime", "close", true, &[11.0, 13.0]),
        ]));
        let rows = Row::of(&s, "s");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].ratio(1), "0.51 (ahead)");
        assert_eq!(rows[1].ratio(1), "0.51 (**behind**)");
        assert_eq!(rows[2].ratio(1), "0.92 (runs overlap)");
        assert_eq!(rows[0].ratio(2), "-");
    }

    #[test]
    fn a_merged_run_replaces_its_scenarios_rows_and_is_named() {
        let mut first = session(serde_json::json!([rec(
            "informer-rs",
            "heap",
            false,
            &[1.0]
        ),]));
        let mut later = session(serde_json::json!([rec(
            "informer-rs",
            "heap",
            false,
            &[2.0]
        ),]));
        first.records[0].scenario = "sync".into();
        first.records.push(Record {
            scenario: "fleet".into(),
            ..serde_json::from_value(rec("informer-rs", "heap", false, &[3.0])).unwrap()
        });
        later.records[0].scenario = "fleet".into();
        later.commit = Some("abc".into());
        later.finished = Some(1_795_000_000);
        first.merge(later).unwrap();
        assert_eq!(find(&first, "sync", "c", "heap", 0), Some(1.0));
        assert_eq!(find(&first, "fleet", "c", "heap", 0), Some(2.0), "replaced");
        assert_eq!(first.records.len(), 2);
        let text = reruns(&first, true);
        assert!(text.contains("--only fleet --merge"), "{text}");
        assert!(text.contains("12. Fleets"), "{text}");
        assert!(text.contains("commit `abc`, 2026-11-18"), "{text}");
        // Merging a run with no records is refused.
        assert!(first.merge(session(serde_json::json!([]))).is_err());
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
        // A session's own time renders the same date on any day.
        assert_eq!(date_of(1_795_000_000), "2026-11-18");
        assert_eq!(date_of(0), "1970-01-01");
    }
}
