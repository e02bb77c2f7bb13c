//! The HTTP front end reads in one direction: a completion goes from the
//! accept loop down to its answer, and a file of `src/http/` names only
//! files below it on that path ([`PATH`], drawn in `docs/design.md`). A
//! file that reached back up (an answer calling into the routes, say)
//! would make a circle again: this test names the file and the import.
//!
//! It reads the sources, not the compiler's view: an import is any
//! `super::name` or `crate::http::name` outside comments where `name` is
//! a sibling module.

use std::fs;
use std::path::Path;

/// `src/http/`'s files, top of the path first. A file may name only files
/// after it.
const PATH: &[&str] = &[
    // A test of the path's futures (cfg(test) only): it names the files
    // whose futures it measures, so it sits above them all.
    "sizes",
    // The socket: the accept loop and its caps, a connection's life.
    "server",
    "conn",
    // A completion answered before hyper, or a request handed to hyper.
    "early",
    "handoff",
    // Routes, then the completion handler and what it calls.
    "routes",
    "completions",
    "validate",
    "answer",
    "instant",
    // What the handlers share: the request's record, the connection's
    // exchange with hyper, the page, replies, bodies, text, JSON.
    "ledger",
    "exchange",
    "page",
    "reply",
    "body",
    "text",
    "response",
    "request",
    "head",
];

/// Every `(module, line)` that `source` imports from a sibling module.
fn imports(source: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for prefix in ["super::", "crate::http::"] {
            for (at, _) in code.match_indices(prefix) {
                let rest = &code[at + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((name, n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn http_files_import_only_what_lies_below_them_on_the_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
    let mut files = Vec::new();
    for entry in fs::read_dir(&dir).expect("src/http") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a UTF-8 file name")
                .to_owned();
            if stem != "mod" {
                files.push((stem, path));
            }
        }
    }
    let mut unplaced: Vec<_> = files
        .iter()
        .map(|(m, _)| m.as_str())
        .filter(|m| !PATH.contains(m))
        .collect();
    unplaced.sort_unstable();
    assert!(
        unplaced.is_empty(),
        "src/http/ files not placed on the path in tests/layering.rs: {unplaced:?}"
    );
    let rank = |m: &str| PATH.iter().position(|p| *p == m);
    let mut upward = Vec::new();
    for (module, path) in &files {
        let source = fs::read_to_string(path).expect("a source file");
        let own = rank(module).expect("placed above");
        for (name, line) in imports(&source) {
            if let Some(theirs) = rank(&name) {
                if theirs <= own && name != *module {
                    upward.push(format!("http/{module}.rs:{line} names `{name}`"));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the path (a file names only files below it):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_reader_finds_imports_and_skips_comments() {
    let source = "use super::body::Body;\n\
                  // super::routes in a comment\n\
                  let r = crate::http::reply::status(x); // super::conn\n\
                  use super::*;\n";
    let got = imports(source);
    assert_eq!(got, vec![("body".to_owned(), 1), ("reply".to_owned(), 3)]);
}
