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
//! `tests/metrics_doc.rs` holds the metrics reference to a running daemon.
//!
//! Links to `http:`, `https:` and `mailto:` are not followed.

mod markdown;

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

use markdown::{anchor, code_spans, documents, expand_braces, link_targets, repo, section, Doc};

/// The README's two commands, in its first two code blocks.
const SERVE_COMMAND: &str = "cargo run --release --bin fabricd -- serve --sim";
const TEST_COMMAND: &str = "cargo test --workspace";

/// Where a path named in the text must exist, from the repository's root.
const PATH_ROOTS: &[&str] = &["scripts/", "docs/", "results/", "tests/", "firmware/"];

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
    assert_eq!(code_spans("| `a` | b | `c`, `d` |"), ["a", "c", "d"]);
    assert_eq!(
        section("x\n## A\none\n### B\ntwo\n## C\nthree", "## A"),
        Some("one\n### B\ntwo")
    );
}

/// The heading of `docs/design.md`'s map of the scripts and tests.
const MAP_SECTION: &str = "### Scripts and tests";

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
