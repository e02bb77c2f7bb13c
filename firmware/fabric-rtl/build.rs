//! With the `verilated` feature: Verilates `rtl/sim/fabric_cosim.v` and the
//! shell, slots and engines under it, and compiles the model, Verilator's
//! runtime and `rtl/sim/cosim.cpp` (the C interface) into one static
//! library. Verilator comes from the system (Debian's `verilator`); its
//! runtime sources are where `verilator --getenv VERILATOR_ROOT` says.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let rtl = manifest.join("../../rtl");
    println!("cargo:rerun-if-changed={}", rtl.display());
    for dir in ["common", "shell", "engine", "engine/lm", "slot", "sim"] {
        println!("cargo:rerun-if-changed={}", rtl.join(dir).display());
    }
    // FABRIC_RTL_MUTANTS set: the RTL built with its deliberate breaks
    // (FABRIC_MUTANTS), each off until a run names it in FABRIC_RTL_BREAK
    // (read by cosim.cpp and lm.cpp, not here): scripts/rtl-mutants builds
    // once for all of them.
    println!("cargo:rerun-if-env-changed=FABRIC_RTL_MUTANTS");
    // FABRIC_RTL_X_INITIAL=unique: every register and memory starts from a
    // random value (Verilator's --x-initial unique and --x-assign unique,
    // the seed set at run time by cosim.cpp), not zero: a design that
    // relies on a value it never reset fails. FABRIC_RTL_TRACE set: the
    // model can write waveforms (--trace), and a Cosim writes one into the
    // directory FABRIC_RTL_TRACE names at run time.
    println!("cargo:rerun-if-env-changed=FABRIC_RTL_X_INITIAL");
    println!("cargo:rerun-if-env-changed=FABRIC_RTL_TRACE");
    if std::env::var_os("CARGO_FEATURE_VERILATED").is_none() {
        return;
    }
    let mutants = std::env::var_os("FABRIC_RTL_MUTANTS").is_some();
    // A build with its breaks may leave a signal unused, which is their
    // point: its warnings are not fatal.
    let (breaks, no_fatal): (&[&str], &[&str]) = if mutants {
        (&["+define+FABRIC_MUTANTS"], &["-Wno-fatal"])
    } else {
        (&[], &[])
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let obj = out.join("verilated");
    let _ = std::fs::remove_dir_all(&obj);
    let mut sources: Vec<PathBuf> = vec![rtl.join("sim/fabric_cosim.v")];
    for dir in ["common", "shell", "slot", "engine", "engine/lm"] {
        sources.extend(verilog_in(&rtl.join(dir)));
    }
    let unique = match std::env::var("FABRIC_RTL_X_INITIAL").as_deref() {
        Ok("unique") => true,
        Ok("fast") | Err(_) => false,
        Ok(other) => panic!("FABRIC_RTL_X_INITIAL is unique or fast, not {other:?}"),
    };
    let trace = std::env::var_os("FABRIC_RTL_TRACE").is_some();
    let x = if unique { "unique" } else { "fast" };
    let mut verilator = Command::new("verilator");
    verilator
        .args(["--cc", "-O3", "--x-assign", x, "--x-initial", x])
        .args(if trace { &["--trace"][..] } else { &[][..] })
        // Every warning, none switched off (scripts/rtl-lint checks each
        // file the same way).
        .arg("-Wall")
        .args(no_fatal)
        .args(["--top-module", "fabric_cosim", "--Mdir"])
        .arg(&obj)
        .arg(format!("-I{}", rtl.join("shell").display()))
        .arg(format!("-I{}", rtl.join("common").display()))
        .arg(format!("-I{}", rtl.join("engine").display()))
        .args(breaks)
        .args(&sources);
    let status = verilator.status().unwrap_or_else(|e| {
        panic!("the `verilated` feature runs Verilator (apt-get install verilator): {e}")
    });
    assert!(status.success(), "verilator failed on {}", rtl.display());
    // The transformer engine alone (rtl/engine/lm), its own model beside
    // the fabric's: `lm.rs` checks it against fabric_model::lm.
    let obj_lm = out.join("verilated_lm");
    let _ = std::fs::remove_dir_all(&obj_lm);
    let mut lm_sources = verilog_in(&rtl.join("engine/lm"));
    lm_sources.push(rtl.join("common/fabric_axi_rd.v"));
    let status = Command::new("verilator")
        .args(["--cc", "-O3", "--x-assign", x, "--x-initial", x, "-Wall"])
        .args(no_fatal)
        .args(["--top-module", "fabric_lm", "--Mdir"])
        .arg(&obj_lm)
        .arg(format!("-I{}", rtl.join("shell").display()))
        .arg(format!("-I{}", rtl.join("engine").display()))
        .args(breaks)
        .args(&lm_sources)
        .status()
        .unwrap_or_else(|e| panic!("verilator: {e}"));
    assert!(
        status.success(),
        "verilator failed on {}",
        rtl.join("engine/lm").display()
    );
    let root = Command::new("verilator")
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .expect("verilator --getenv VERILATOR_ROOT");
    let root = PathBuf::from(String::from_utf8_lossy(&root.stdout).trim());
    let include = root.join("include");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .warnings(false)
        .include(&obj)
        .include(&obj_lm)
        .include(&include)
        .include(include.join("vltstd"))
        .file(rtl.join("sim/cosim.cpp"))
        .file(rtl.join("sim/lm.cpp"))
        .file(include.join("verilated.cpp"))
        .file(include.join("verilated_dpi.cpp"))
        .file(include.join("verilated_threads.cpp"));
    if unique {
        build.define("FCS_X_UNIQUE", None);
    }
    if mutants {
        build.define("FCS_MUTANTS", None);
    }
    if trace {
        build
            .define("FCS_TRACE", None)
            .file(include.join("verilated_vcd_c.cpp"));
    }
    for dir in [&obj, &obj_lm] {
        for entry in std::fs::read_dir(dir).expect("verilator's output") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "cpp") {
                build.file(path);
            }
        }
    }
    build.compile("fabric_cosim");
}

fn verilog_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "v"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
