//! The metrics reference against a running daemon: `docs/metrics.md`
//! lists every metric of its `/metrics` once, with its type, its labels
//! and their values, and every `fabricd_*` metric any document names is
//! one it exports.

mod common;
mod markdown;

use std::collections::{BTreeMap, BTreeSet};

use markdown::{code_spans, documents, expand_braces, repo, Doc};

/// Labels whose values are the board's own (a slot's number, a model's
/// name), not a fixed set that `docs/metrics.md` can list.
const OPEN_LABELS: &[&str] = &["slot", "model"];

/// A metric family of `/metrics`: its type, and its labels with the values
/// each took.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    labels: BTreeMap<String, BTreeSet<String>>,
}

/// The families of a Prometheus text answer, by name. A histogram's
/// `_bucket`, `_sum` and `_count` samples are its family's, and their `le`
/// is not one of its labels.
fn exposition(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                out.entry(name.to_string()).or_default().kind = kind.to_string();
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let series = &line[..end];
        let family = histogram_of(&out, series).unwrap_or(series).to_string();
        let histogram = histogram_of(&out, series).is_some();
        let family = out.entry(family).or_default();
        let labels = line[end..].strip_prefix('{').unwrap_or("");
        for (key, value) in label_pairs(labels) {
            if !(histogram && key == "le") {
                family.labels.entry(key).or_default().insert(value);
            }
        }
    }
    out
}

/// The histogram family a `_bucket`, `_sum` or `_count` series is of.
fn histogram_of<'a>(families: &BTreeMap<String, Family>, series: &'a str) -> Option<&'a str> {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| series.strip_suffix(suffix))
        .filter(|f| families.get(*f).is_some_and(|f| f.kind == "histogram"))
}

/// The label pairs of a sample, from just after its `{` to its `}`.
fn label_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        let key = key.trim_start_matches(',').trim();
        if key.is_empty() || key.contains('}') || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        let mut escaped = false;
        for c in chars.by_ref() {
            match c {
                _ if escaped => {
                    value.push(c);
                    escaped = false;
                }
                '\\' => escaped = true,
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.to_string(), value));
    }
    out
}

/// A row of `docs/metrics.md`'s tables: `| name | type | labels | meaning |`.
struct Row {
    line: usize,
    kind: String,
    labels: BTreeSet<String>,
    /// Everything the row names in code spans: a label's values among them.
    named: BTreeSet<String>,
}

/// The rows of the metrics reference by name, and what is wrong with them.
fn rows(doc: &Doc) -> (BTreeMap<String, Row>, Vec<String>) {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut problems = Vec::new();
    for (n, line) in &doc.prose {
        if !line.starts_with("| `fabricd_") {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, kind, labels, _, _] = cells[..] else {
            problems.push(format!(
                "{}:{n}: a metric's row has {} cells, not name, type, labels and meaning",
                doc.name,
                cells.len().saturating_sub(2)
            ));
            continue;
        };
        let name = name.trim_matches('`').to_string();
        let row = Row {
            line: *n,
            kind: kind.to_string(),
            labels: code_spans(labels).into_iter().collect(),
            named: code_spans(line).into_iter().collect(),
        };
        if let Some(first) = rows.insert(name.clone(), row) {
            problems.push(format!(
                "{}:{n}: {name} is listed again (first at line {})",
                doc.name, first.line
            ));
        }
    }
    (rows, problems)
}

/// The `fabricd_*` metric names in a text, `{a,b}` expanded, with their
/// line numbers. A `{` after a name's end begins its labels, which are not
/// part of it; `fabricd_*_defconfig` (Buildroot's) and a name inside
/// another (`fleet:fabricd_…`, a recording rule's) are not metrics.
fn metric_mentions(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices("fabricd_") {
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || "_:-".contains(c)) {
                continue;
            }
            let mut name = String::new();
            let mut alternatives = false;
            for c in line[at..].chars() {
                match c {
                    c if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' => {}
                    '{' if !alternatives && name.ends_with('_') => alternatives = true,
                    ',' if alternatives => {}
                    '}' if alternatives => alternatives = false,
                    _ => break,
                }
                name.push(c);
            }
            out.extend(
                expand_braces(&name)
                    .into_iter()
                    .filter(|n| !n.ends_with("_defconfig"))
                    .map(|n| (i + 1, n)),
            );
        }
    }
    out
}

/// Everything wrong between `/metrics` and the documents: the reference's
/// rows against the families, and every metric any document names.
fn metric_problems(
    exported: &BTreeMap<String, Family>,
    reference: &Doc,
    docs: &[Doc],
) -> Vec<String> {
    let (rows, mut out) = rows(reference);
    let at = |row: &Row| format!("{}:{}", reference.name, row.line);
    for (name, family) in exported {
        let Some(row) = rows.get(name) else {
            out.push(format!(
                "{}: /metrics exports {name} ({}), which it does not list",
                reference.name, family.kind
            ));
            continue;
        };
        if row.kind != family.kind {
            out.push(format!(
                "{}: {name} is a {}, not a {}",
                at(row),
                family.kind,
                row.kind
            ));
        }
        let keys: BTreeSet<String> = family.labels.keys().cloned().collect();
        if keys != row.labels {
            out.push(format!(
                "{}: {name}'s labels are {keys:?}, not {:?}",
                at(row),
                row.labels
            ));
        }
        for (key, values) in &family.labels {
            if OPEN_LABELS.contains(&key.as_str()) {
                continue;
            }
            for value in values.iter().filter(|v| !row.named.contains(*v)) {
                out.push(format!(
                    "{}: {name}{{{key}=\"{value}\"}} is exported, and its row does not name `{value}`",
                    at(row)
                ));
            }
        }
    }
    for (name, row) in &rows {
        if !exported.contains_key(name) {
            out.push(format!(
                "{}: lists {name}, which /metrics does not export",
                at(row)
            ));
        }
    }
    for doc in docs {
        for (n, name) in metric_mentions(&doc.text) {
            if !exported.contains_key(&name) && histogram_of(exported, &name).is_none() {
                out.push(format!(
                    "{}:{n}: names {name}, which /metrics does not export",
                    doc.name
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_reference_lists_what_metrics_exports() {
    let repo = repo();
    let daemon = common::Daemon::start(|_| {}, |_| {}).await;
    let reply = common::get(daemon.addr, "/metrics")
        .await
        .expect("GET /metrics");
    let _root = daemon.stop().await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let exported = exposition(&reply.text());
    assert!(
        exported.contains_key("fabricd_requests_total")
            && exported.contains_key("fabricd_shell_active"),
        "/metrics read as {exported:?}, from:\n{}",
        reply.text()
    );
    let docs = documents(&repo);
    let reference = docs
        .iter()
        .find(|d| d.name == "docs/metrics.md")
        .expect("docs/metrics.md was read");
    let problems = metric_problems(&exported, reference, &docs);
    assert!(
        problems.is_empty(),
        "{} differences between /metrics and the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_metric_checks_read_what_they_are_given() {
    let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{outcome=\"ok\"} 1\n\
                a_total{outcome=\"x,\\\"y\"} 2\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\n\
                h_sum 0\nh_count 0\n# TYPE g gauge\ng{slot=\"0\",model=\"\"} 2\n";
    let f = exposition(text);
    assert_eq!(f.keys().collect::<Vec<_>>(), ["a_total", "g", "h"]);
    assert_eq!(f["a_total"].kind, "counter");
    assert_eq!(
        f["a_total"].labels["outcome"].iter().collect::<Vec<_>>(),
        ["ok", "x,\"y"]
    );
    assert!(f["h"].labels.is_empty(), "le is not a label: {:?}", f["h"]);
    assert_eq!(f["g"].labels.keys().collect::<Vec<_>>(), ["model", "slot"]);
    assert_eq!(histogram_of(&f, "h_bucket"), Some("h"));
    assert_eq!(histogram_of(&f, "a_total_count"), None);

    let named: Vec<String> = metric_mentions(
        "`fabricd_cache_{hits,misses}_total`, `fabricd_answers_total{source}`,\n\
         `fabricd_superseded_total{state=\"late\"}`; make fabricd_zed_defconfig; \
         fleet:fabricd_requests:rate5m; FABRICD_SIM_RTL",
    )
    .into_iter()
    .map(|(_, n)| n)
    .collect();
    assert_eq!(
        named,
        [
            "fabricd_cache_hits_total",
            "fabricd_cache_misses_total",
            "fabricd_answers_total",
            "fabricd_superseded_total"
        ]
    );
}
