//! The simulator reads in one direction: the process (`lib.rs`, `main.rs`)
//! starts the board's pieces, and a module of `src/` names only modules
//! below it on [`PATH`]: the kernel's side (the rig's PL, the overlays and
//! the FPGA manager) above the fabric it loads, the fabric above the RTL it
//! may run and the board files it lays out, those above the configuration
//! everything reads. A module that reached back up (the configuration
//! naming the kernel's map, say) would make a circle again: this test
//! names the file and the import.
//!
//! It reads the sources, not the compiler's view: an import is any
//! `crate::name` outside comments where `name` is a module of `src/`.

use std::fs;
use std::path::Path;

/// `src/`'s modules, top first. A module may name only modules after it.
const PATH: &[&str] = &[
    // What watches the board's files and serves the interrupt socket.
    "watch", "irq",
    // The kernel's side: the real-kernel rig's PL, and the FPGA manager and
    // configfs of the simulated board.
    "kernel", "reconfig",
    // The fabric: the register window's device side, the transformer
    // engine's contexts, and the RTL it may be.
    "device", "engine", "rtl",
    // The board's files, laid out; the configuration; the kernel's rules
    // the simulated board keeps.
    "layout", "config", "rules",
];

/// The process's own files, which start everything and sit above it all.
const ROOTS: &[&str] = &["lib", "main"];

/// Every `(module, line)` that `source` imports from a module of `src/`.
fn imports(source: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push((name, n + 1));
            }
        }
    }
    found
}

#[test]
fn modules_import_only_what_lies_below_them_on_the_path() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in fs::read_dir(&dir).expect("src") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a UTF-8 file name")
                .to_owned();
            files.push((stem, path));
        }
    }
    let mut unplaced: Vec<_> = files
        .iter()
        .map(|(m, _)| m.as_str())
        .filter(|m| !PATH.contains(m) && !ROOTS.contains(m))
        .collect();
    unplaced.sort_unstable();
    assert!(
        unplaced.is_empty(),
        "src/ modules not placed on the path in tests/layering.rs: {unplaced:?}"
    );
    let rank = |m: &str| PATH.iter().position(|p| *p == m);
    let mut upward = Vec::new();
    for (module, path) in &files {
        let Some(own) = rank(module) else {
            continue; // a root: it may name anything
        };
        let source = fs::read_to_string(path).expect("a source file");
        for (name, line) in imports(&source) {
            if let Some(theirs) = rank(&name) {
                if theirs <= own && name != *module {
                    upward.push(format!("src/{module}.rs:{line} names `{name}`"));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the path (a module names only modules below it):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_reader_finds_imports_and_skips_comments() {
    let source = "use crate::config::SimConfig;\n\
                  // crate::kernel in a comment\n\
                  let m = crate::layout::DMA(x); // crate::rtl\n\
                  use crate::SimError;\n";
    let got = imports(source);
    assert_eq!(
        got,
        vec![("config".to_owned(), 1), ("layout".to_owned(), 3)]
    );
}
