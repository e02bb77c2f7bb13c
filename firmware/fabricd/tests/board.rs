//! The board side of the repository, checked without a board: the scripts'
//! help and refusals, `S60fabricd` against a fake daemon, `flash-sd`
//! against loop devices (as root), a simulated fleet behind HAProxy, and
//! the structure of the Buildroot tree. The checks live in `tests/` as shell
//! and Python, the languages of what they check; these run them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(program: &str, script: &str) {
    let path = repo().join("tests").join(script);
    // The scripts that start boards run this build's binaries.
    let bins = Path::new(env!("CARGO_BIN_EXE_fabricd"))
        .parent()
        .unwrap_or_else(|| Path::new("."));
    let out = Command::new(program)
        .arg(&path)
        .env("FABRICD_BIN_DIR", bins)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("{program} {}: {e}", path.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} failed:\n{text}");
    // Each script ends with its count; show it in `cargo test -- --nocapture`.
    println!("{}", text.lines().last().unwrap_or_default());
}

#[test]
fn the_board_scripts_explain_themselves_and_refuse_bad_input() {
    run("bash", "scripts.sh");
}

#[test]
fn the_init_script_stops_and_restarts_through_its_pid_files() {
    run("bash", "init-scripts.sh");
}

#[test]
fn flash_sd_refuses_what_it_must_and_writes_what_it_should() {
    run("bash", "flash-sd.sh");
}

#[test]
fn a_board_that_fails_to_come_back_stops_the_rolling_rotation_with_the_others_serving() {
    run("bash", "fleet.sh");
}

#[test]
fn the_buildroot_tree_is_well_formed() {
    run("python3", "check-buildroot-tree.py");
}
