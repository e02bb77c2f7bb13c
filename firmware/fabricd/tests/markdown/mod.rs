//! Reading the repository's Markdown as GitHub shows it: a file's prose
//! and fenced code blocks, its headings' anchors, its links, its code spans
//! and sections. Shared by `tests/docs.rs` (the docs against the tree) and
//! `tests/metrics_doc.rs` (the metrics reference against `/metrics`).

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One Markdown file, split into its prose and its fenced code blocks.
pub struct Doc {
    /// From the repository's root, with `/`.
    pub name: String,
    pub text: String,
    /// Lines outside fenced code blocks: (line number, line).
    pub prose: Vec<(usize, String)>,
    /// Fenced code blocks: (line number of the opening fence, content).
    pub blocks: Vec<(usize, String)>,
}

impl Doc {
    pub fn read(repo: &Path, name: &str) -> Doc {
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
    pub fn dir(&self) -> PathBuf {
        Path::new(&self.name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Anchors of the headings, with GitHub's `-1`, `-2` for repeats.
    pub fn anchors(&self) -> BTreeSet<String> {
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
    pub fn links(&self) -> Vec<(usize, String)> {
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
pub fn link_targets(line: &str) -> Vec<String> {
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
pub fn anchor(title: &str) -> String {
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

/// `a{b,c}d` as `abd` and `acd`.
pub fn expand_braces(path: &str) -> Vec<String> {
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

/// The Markdown files the checks read: the README, CONTRIBUTING.md,
/// results/README.md and every file of docs/.
pub fn documents(repo: &Path) -> Vec<Doc> {
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

/// The text under `heading` in `text`, to the next heading of its level or
/// above.
pub fn section<'a>(text: &'a str, heading: &str) -> Option<&'a str> {
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
pub fn code_spans(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}
