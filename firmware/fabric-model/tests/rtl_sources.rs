//! The RTL's copies of the contract's constants agree with the Rust ones.
//! `FABRICD_BLESS=1 cargo test -p fabric-model --test rtl_sources` rewrites
//! them from the Rust.

use std::path::PathBuf;

use fabric_hw::sampling::EXP2;

fn rtl(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../rtl")
        .join(path)
}

fn exp2_include() -> String {
    let mut s = String::from(
        "// Generated from fabric_hw::sampling::EXP2 by\n\
         // `FABRICD_BLESS=1 cargo test -p fabric-model --test rtl_sources`; do not edit.\n\
         // round(65536 * 2^(-i/256)), the weight of a fraction of a halving.\n\
         function [16:0] exp2_q16(input [7:0] idx);\n    case (idx)\n",
    );
    for (i, w) in EXP2.iter().enumerate() {
        s.push_str(&format!("        8'd{i}: exp2_q16 = 17'd{w};\n"));
    }
    s.push_str("        default: exp2_q16 = 17'd0;\n    endcase\nendfunction\n");
    s
}

#[test]
fn the_engines_exp2_table_is_the_contracts() {
    let path = rtl("engine/fabric_exp2.vh");
    let want = exp2_include();
    if std::env::var_os("FABRICD_BLESS").is_some() {
        std::fs::write(&path, &want).expect("writing the include");
    }
    let have = std::fs::read_to_string(&path).expect("reading rtl/engine/fabric_exp2.vh");
    assert!(
        have == want,
        "{} differs from fabric_hw::sampling::EXP2: rerun with FABRICD_BLESS=1",
        path.display()
    );
}
