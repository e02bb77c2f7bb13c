//! The documentation against the tree: `README.md`, `docs/*.md` and
//! `results/README.md` name files, headings and commands, and each can go
//! stale when something moves. From the files alone, this checks that:
//! - every relative link (`[text](target)`, images too) names a file or
//!   directory that exists, and its `#anchor` a heading of that Markdown
//!   file, by GitHub's rule for anchors ([`anchor`]);
//! - every path under `scripts/`, `docs/`, `results/`, `tests/` or
//!   `firmware/` named in the text, code blocks included, exists; in such a
//!   path `*` and a `<placeholder>` stand for any part of a name, `{a,b}`
//!   for each of its names, and a shell expansion (`$(date …)`) ends the
//!   name with a wildcard;
//! - the README's first two code blocks are its two commands, the serve
//!   command and the test command, and `.ci/run` runs the test command.
//!
//! Links to `http:`, `https:` and `mailto:` are not followed.

use std::collections::{BTreeSet, HashMap};
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
    let mut names = vec!["README.md".to_string(), "results/README.md".to_string()];
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
