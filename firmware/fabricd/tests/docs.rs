//! The documentation against the tree: `README.md`, `CONTRIBUTING.md`,
//! `docs/*.md` and `results/README.md` name files, headings, commands and
//! metrics, and each can go stale when something moves. From the files
//! alone, this checks that:
//! - every relative link (`[text](target)`, images too) names a file or
//!   directory that exists, and its `#anchor` a heading of that Markdown
//!   file, by GitHub's rule for anchors ([`anchor`]);
//! - every path under `scripts/`, `docs/`, `results/`, `tests/` or
//!   `firmware/` named in the text, code blocks included, exists; in such a
//!   path `*` and a `<placeholder>` stand for any part of a name, `{a,b}`
//!   for each of its names, and a shell expansion (`$(date …)`) ends the
//!   name with a wildcard;
//! - the README's first two code blocks are its two commands, the serve
//!   command and the test command, and `.ci/run` runs the test command;
//! - `docs/design.md`'s map of the scripts and tests names every script
//!   and every test file.
//!
//! And against a running daemon, that `docs/metrics.md` lists every metric
//! of its `/metrics` once, with its type, its labels and their values, and
//! that every `fabricd_*` metric any document names is one it exports.
//!
//! Links to `http:`, `https:` and `mailto:` are not followed.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The README's two commands, in its first two code blocks.
const SERVE_COMMAND: &str = "cargo run --release --bin fabricd -- serve --sim";
const TEST_COMMAND: &str = "cargo test --workspace";

/// Where a path named in the text must exist, from the repository's root.
const PATH_ROOTS: &[&str] = &["scripts/", "docs/", "results/", "tests/", "firmware/"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One Markdown file, split into its prose and its fenced code blocks.
struct Doc {
    /// From the repository's root, with `/`.
    name: String,
    text: String,
    /// Lines outside fenced code blocks: (line number, line).
    prose: Vec<(usize, String)>,
    /// Fenced code blocks: (line number of the opening fence, content).
    blocks: Vec<(usize, String)>,
}

impl Doc {
    fn read(repo: &Path, name: &str) -> Doc {
        let text =
            fs::read_to_string(repo.join(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"));
        let mut prose = Vec::new();
        let mut blocks = Vec::new();
        // The open block: its first line, its fence, what it holds so far.
        let mut open: Option<(usize, &str, String)> = None;
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let trimmed = line.trim_start();
            match open.take() {
                None => match ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f)) {
                    Some(fence) => open = Some((n, fence, String::new())),
                    None => prose.push((n, line.to_string())),
                },
                Some((start, fence, body)) if trimmed.starts_with(fence) => {
                    blocks.push((start, body));
                }
                Some((start, fence, mut body)) => {
                    body.push_str(line);
                    body.push('\n');
                    open = Some((start, fence, body));
                }
            }
        }
        Doc {
            name: name.to_string(),
            text,
            prose,
            blocks,
        }
    }

    /// The directory links in this file are relative to, from the root.
    fn dir(&self) -> PathBuf {
        Path::new(&self.name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Anchors of the headings, with GitHub's `-1`, `-2` for repeats.
    fn anchors(&self) -> BTreeSet<String> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = BTreeSet::new();
        for (_, line) in &self.prose {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            let Some(title) = line.get(hashes..) else {
                continue;
            };
            if !(1..=6).contains(&hashes) || !title.starts_with(' ') {
                continue;
            }
            let base = anchor(title.trim().trim_end_matches('#').trim());
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        out
    }

    /// The targets of the links in the prose: (line number, target).
    fn links(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        // Code spans end at a blank line, so a paragraph at a time.
        let mut paragraph: Vec<(usize, &str)> = Vec::new();
        for (n, line) in self
            .prose
            .iter()
            .map(|(n, l)| (*n, l.as_str()))
            .chain([(0, "")])
        {
            if !line.trim().is_empty() {
                paragraph.push((n, line));
                continue;
            }
            let mut in_code = false;
            for (n, line) in paragraph.drain(..) {
                let mut plain = String::new();
                for c in line.chars() {
                    if c == '`' {
                        in_code = !in_code;
                    } else if !in_code {
                        plain.push(c);
                    }
                }
                out.extend(link_targets(&plain).into_iter().map(|t| (n, t)));
            }
        }
        out
    }
}

/// The targets of `[text](target)` in a line without code spans.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        // A title after the target (`[x](y "title")`) is not part of it.
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// A heading's anchor as GitHub makes it: lowercase, each space a `-`,
/// every other character that is not a letter, a digit, `-` or `_` dropped.
fn anchor(title: &str) -> String {
    title
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// `a/../b` to `b`, without asking the file system (the file may be missing).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The paths under [`PATH_ROOTS`] named in `text`: (line number, path).
fn named_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for root in PATH_ROOTS {
            for (at, _) in line.match_indices(root) {
                // A root inside a longer path or a word (`/lib/firmware/`,
                // `../scripts/`, `contests/`) is not one.
                let before = line[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || "_-./~:".contains(c)) {
                    continue;
                }
                let mut path = String::new();
                let mut braces = 0usize;
                for c in line[at..].chars() {
                    match c {
                        '{' => braces += 1,
                        '}' => braces = braces.saturating_sub(1),
                        ',' if braces > 0 => {}
                        '$' => {
                            path.push('$');
                            break;
                        }
                        c if c.is_ascii_alphanumeric() || "_./*<>-".contains(c) => {}
                        _ => break,
                    }
                    path.push(c);
                }
                let path = path.trim_end_matches(['.', ':']);
                out.push((i + 1, path.to_string()));
            }
        }
    }
    out
}

/// `a{b,c}d` as `abd` and `acd`.
fn expand_braces(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else {
        return vec![path.to_string()];
    };
    if close < open {
        return vec![path.to_string()];
    }
    path[open + 1..close]
        .split(',')
        .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &path[..open], &path[close + 1..])))
        .collect()
}

/// A name with its placeholders as `*`: `<date>` and a `$` to the end.
fn as_pattern(name: &str) -> String {
    let name = match name.find('$') {
        Some(at) => format!("{}*", &name[..at]),
        None => name.to_string(),
    };
    let mut out = String::new();
    let mut in_placeholder = false;
    for c in name.chars() {
        match c {
            '<' => {
                in_placeholder = true;
                out.push('*');
            }
            '>' => in_placeholder = false,
            c if !in_placeholder => out.push(c),
            _ => {}
        }
    }
    out
}

/// Whether `name` matches `pattern`, where `*` is any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .filter(|&i| name.is_char_boundary(i))
                    .any(|i| wildcard(tail, &name[i..]))
        }
    }
}

/// Whether a path of (possibly wildcard) names exists under `base`.
fn exists(base: &Path, names: &[String]) -> bool {
    let Some((name, rest)) = names.split_first() else {
        return base.exists();
    };
    if name.is_empty() {
        // A trailing `/`: a directory.
        return base.is_dir() && exists(base, rest);
    }
    if !name.contains('*') {
        return exists(&base.join(name), rest);
    }
    fs::read_dir(base).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| wildcard(name, n) && exists(&e.path(), rest))
        })
    })
}

fn documents(repo: &Path) -> Vec<Doc> {
    let mut names = vec![
        "README.md".to_string(),
        "CONTRIBUTING.md".to_string(),
        "results/README.md".to_string(),
    ];
    let mut docs: Vec<String> = fs::read_dir(repo.join("docs"))
        .expect("reading docs/")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names.iter().map(|n| Doc::read(repo, n)).collect()
}

/// Every problem the documents have, one line each.
fn problems(repo: &Path, docs: &[Doc]) -> Vec<String> {
    let anchors: HashMap<PathBuf, BTreeSet<String>> = docs
        .iter()
        .map(|d| (PathBuf::from(&d.name), d.anchors()))
        .collect();
    let mut out = Vec::new();
    for doc in docs {
        for (n, target) in doc.links() {
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s))
            {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let name = if file.is_empty() {
                PathBuf::from(&doc.name)
            } else {
                normalize(&doc.dir().join(file))
            };
            if !repo.join(&name).exists() {
                out.push(format!(
                    "{}:{n}: link {target}: {} does not exist",
                    doc.name,
                    name.display()
                ));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            match anchors.get(&name) {
                Some(known) if !known.contains(fragment) => out.push(format!(
                    "{}:{n}: link {target}: {} has no heading #{fragment} (it has: {})",
                    doc.name,
                    name.display(),
                    known.iter().cloned().collect::<Vec<_>>().join(", ")
                )),
                Some(_) => {}
                None => out.push(format!(
                    "{}:{n}: link {target}: an anchor into a file this test does not read",
                    doc.name
                )),
            }
        }
        for (n, path) in named_paths(&doc.text) {
            let found = expand_braces(&path).iter().all(|p| {
                let names: Vec<String> = p.split('/').map(as_pattern).collect();
                exists(repo, &names)
            });
            if !found {
                out.push(format!(
                    "{}:{n}: names {path}, which does not exist",
                    doc.name
                ));
            }
        }
    }
    out
}

#[test]
fn every_link_anchor_and_named_path_in_the_docs_exists() {
    let repo = repo();
    let docs = documents(&repo);
    assert!(
        docs.iter().any(|d| d.name == "docs/design.md"),
        "docs/ was read"
    );
    let problems = problems(&repo, &docs);
    assert!(
        problems.is_empty(),
        "{} stale references in the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_readme_commands_are_the_ones_ci_runs() {
    let repo = repo();
    let readme = Doc::read(&repo, "README.md");
    let commands: Vec<&str> = readme
        .blocks
        .iter()
        .map(|(_, b)| b.trim())
        .take(2)
        .collect();
    assert_eq!(
        commands,
        [SERVE_COMMAND, TEST_COMMAND],
        "the README's first two code blocks are its two commands"
    );
    let ci = fs::read_to_string(repo.join(".ci/run")).expect("reading .ci/run");
    let runs_tests = ci.lines().map(str::trim).any(|l| {
        l.strip_prefix(TEST_COMMAND)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    });
    assert!(runs_tests, ".ci/run runs the README's `{TEST_COMMAND}`");
}

#[test]
fn the_checks_read_markdown_as_github_does() {
    assert_eq!(
        anchor("On a real kernel (under QEMU)"),
        "on-a-real-kernel-under-qemu"
    );
    assert_eq!(
        anchor("`fabricctl` and the control socket"),
        "fabricctl-and-the-control-socket"
    );
    assert_eq!(anchor("1. Build the image"), "1-build-the-image");
    assert_eq!(anchor("The load tool: `ladder`"), "the-load-tool-ladder");
    assert_eq!(anchor("bench_serve — the path"), "bench_serve--the-path");

    let doc = Doc {
        name: "x.md".into(),
        text: String::new(),
        prose: ["# A", "## A", "#not a heading", "```"]
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect(),
        blocks: Vec::new(),
    };
    assert_eq!(doc.anchors().into_iter().collect::<Vec<_>>(), ["a", "a-1"]);

    assert_eq!(
        link_targets("see [a](docs/a.md#b), ![c](../d.svg \"t\") and [e](f(g).md)"),
        ["docs/a.md#b", "../d.svg", "f(g).md"]
    );
    let named: Vec<String> = named_paths(
        "run `scripts/fuzz --report results/fuzz-$(date).md`, not /lib/firmware/x or ../docs/y.\n\
         `scripts/bands/{a,b}.toml`: results/x-<date>.md.",
    )
    .into_iter()
    .map(|(_, p)| p)
    .collect();
    assert_eq!(
        named,
        [
            "scripts/fuzz",
            "results/fuzz-$",
            "scripts/bands/{a,b}.toml",
            "results/x-<date>.md"
        ]
    );
    assert_eq!(expand_braces("s/{a,b}.t"), ["s/a.t", "s/b.t"]);
    assert_eq!(as_pattern("x-<date>-$"), "x-*-*");
    assert!(wildcard("bench-*", "bench-serve"));
    assert!(wildcard("fuzz-*.md", "fuzz-2026-12-02.md"));
    assert!(!wildcard("fuzz-*.md", "fuzz-2026-12-02.json"));
}

/// The heading of `docs/design.md`'s map of the scripts and tests.
const MAP_SECTION: &str = "### Scripts and tests";

/// The text under `heading` in `text`, to the next heading of its level or
/// above.
fn section<'a>(text: &'a str, heading: &str) -> Option<&'a str> {
    let start = text.find(&format!("\n{heading}\n"))? + heading.len() + 2;
    let level = heading.chars().take_while(|&c| c == '#').count();
    let end = text[start..]
        .match_indices("\n#")
        .find(|(at, _)| {
            let hashes = text[start + at + 1..]
                .chars()
                .take_while(|&c| c == '#')
                .count();
            hashes <= level && text[start + at + 1 + hashes..].starts_with(' ')
        })
        .map_or(text.len(), |(at, _)| start + at);
    Some(&text[start..end])
}

/// The names in a Markdown line's code spans.
fn code_spans(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The entries of a directory, sorted, hidden ones left out.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// What the map fails to name: each entry of `scripts/` anywhere in it;
/// each entry of `tests/`, and each test file of a crate (by its name
/// without `.rs`; `common/`, the tests' shared helpers, aside), in the
/// row of its directory.
fn unmapped(repo: &Path, map: &str) -> Vec<String> {
    let named = |text: &str, name: &str| {
        let spans = code_spans(text);
        spans
            .iter()
            .any(|s| s.as_str() == name || s.strip_suffix('/') == Some(name))
    };
    let row = |dir: &str| {
        map.lines()
            .find(|l| l.starts_with(&format!("| `{dir}/` |")))
            .unwrap_or("")
    };
    let mut out = Vec::new();
    for name in entries(&repo.join("scripts")) {
        if !map.lines().any(|l| named(l, &name)) {
            out.push(format!("scripts/{name}"));
        }
    }
    let mut dirs = vec!["tests".to_string()];
    for krate in entries(&repo.join("firmware")) {
        let dir = format!("firmware/{krate}/tests");
        if repo.join(&dir).is_dir() {
            dirs.push(dir);
        }
    }
    for dir in dirs {
        let row = row(&dir);
        for name in entries(&repo.join(&dir)) {
            if dir != "tests" && name == "common" {
                continue;
            }
            let stem = match dir.as_str() {
                "tests" => name.as_str(),
                _ => name.strip_suffix(".rs").unwrap_or(&name),
            };
            if !named(row, stem) {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out
}

#[test]
fn the_design_maps_every_script_and_test() {
    let repo = repo();
    let design = Doc::read(&repo, "docs/design.md");
    let map = section(&design.text, MAP_SECTION)
        .unwrap_or_else(|| panic!("docs/design.md has a section {MAP_SECTION:?}"));
    let missing = unmapped(&repo, map);
    assert!(
        missing.is_empty(),
        "docs/design.md's {MAP_SECTION:?} does not name (in its row, for a test directory): {}",
        missing.join(", ")
    );
}

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

    assert_eq!(code_spans("| `a` | b | `c`, `d` |"), ["a", "c", "d"]);
    assert_eq!(
        section("x\n## A\none\n### B\ntwo\n## C\nthree", "## A"),
        Some("one\n### B\ntwo")
    );
}
