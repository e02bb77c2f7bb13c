//! One gate for every image (issue 16): an image whose part, kind or
//! configuration stream does not fit this board is listed as unusable with
//! its reason by `fabricctl models`, and a load of it is refused before
//! anything is staged for the FPGA manager. Headerless `.bin` images
//! included: their configuration stream's IDCODE names their part.
//!
//! The images here are made from the shipped ones with the bitstream
//! functions alone, so this file builds against any version of the crates.

mod common;

use std::path::{Path, PathBuf};

use common::{control, Daemon};
use fabric_hw::bitstream;
use serde_json::{json, Value};

/// The XC7Z020's IDCODE (a ZedBoard's part), not this board's (a K26).
const XC7Z020_IDCODE: u32 = 0x0372_7093;
/// A type 1 write of one word to the IDCODE register (UG470 table 5-23).
const WRITE_IDCODE: u32 = 0x3001_8001;

/// The configuration data of `bit` in natural order with its IDCODE write
/// changed to `idcode`.
fn with_idcode(bit: &[u8], idcode: u32) -> Vec<u8> {
    let mut data = bitstream::natural_data(bit).expect("data");
    let at = (0..data.len() / 4)
        .map(|w| w * 4)
        .find(|&i| data[i..i + 4] == WRITE_IDCODE.to_be_bytes());
    if let Some(i) = at {
        data[i + 4..i + 8].copy_from_slice(&idcode.to_be_bytes());
    }
    data
}

/// `bit` with its header's UserID changed to `user_id`: the same engine as
/// built against another shell's slot boundary.
fn with_user_id(bit: &[u8], user_id: u32) -> Vec<u8> {
    let h = bitstream::parse_header(bit).expect("header");
    let design: Vec<String> = h
        .design
        .split(';')
        .map(|field| match field.split_once('=') {
            Some(("UserID", _)) => format!("UserID=0X{user_id:08X}"),
            _ => field.to_owned(),
        })
        .collect();
    let data = &bit[h.data_offset..];
    bitstream::write_bit(&design.join(";"), &h.part, &h.date, &h.time, data)
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The shipped catalog plus models whose engines' images do not fit a K26
/// board, each with the shipped kjv table and tokenizer.
fn catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(common::bitstreams()).expect("read") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    let read = |f: &str| std::fs::read(dir.path().join(f)).expect(f);
    let engine = read("trigram-v2.bit");
    let full = read("trigram-v2-full.bit");
    let images: Vec<(&str, Vec<u8>)> = vec![
        // Headerless, byte-swapped as the Zynq managers load it, built for
        // an XC7Z020.
        (
            "zed.bin",
            bitstream::swap_words(&with_idcode(&engine, XC7Z020_IDCODE)).expect("swap"),
        ),
        ("full.bin", bitstream::to_bin(&full).expect("bin")),
        ("slot.bin", bitstream::to_bin(&engine).expect("bin")),
        // The boundary before the 64-bit port and the lane (0x5EED0001).
        ("old-shell.bit", with_user_id(&engine, 0x5EED_0001)),
    ];
    for (name, bytes) in &images {
        std::fs::write(dir.path().join(name), bytes).expect("write");
    }
    let board = "xck26-sfvc784-2LV-c";
    let models = [
        // (model, its engine's image, manifest part, kind)
        ("zed-bin", "zed.bin", board, "\"partial\""),
        ("full-bin-as-partial", "full.bin", board, "\"partial\""),
        (
            "full-bit-as-partial",
            "trigram-v2-full.bit",
            board,
            "\"partial\"",
        ),
        ("odd-kind", "trigram-v2.bit", board, "\"parital\""),
        (
            "zed-part",
            "trigram-v2.bit",
            "xc7z020clg484-1",
            "\"partial\"",
        ),
        ("good-bin", "slot.bin", board, "\"partial\""),
        ("old-shell", "old-shell.bit", board, "\"partial\""),
    ];
    let tok = read("kjv.tok");
    let table = read("kjv.ftb");
    let t = fabric_model::table::Table::from_bytes(&table).expect("kjv's table");
    let identity = fabric_hw::shell::hex(&t.identity());
    let mut manifest = std::fs::read_to_string(dir.path().join("manifest.toml")).expect("manifest");
    for (model, file, part, kind) in models {
        // Each its own engine (the trigram engine's id, so a slot running
        // the shipped one reports it) with the one image.
        manifest.push_str(&format!(
            "\n[[engine]]\nname = \"{model}-engine\"\nkind = 1\nversion = 2\n\n\
             [[engine.image]]\nfile = \"{file}\"\nsha256 = \"{}\"\npart = \"{part}\"\nslots = [0, 1]\nkind = {kind}\n\n\
             [[model]]\nname = \"{model}\"\nengine = \"{model}-engine\"\n\
             table = \"kjv.ftb\"\ntable_sha256 = \"{}\"\ntable_crc = {}\nidentity = \"{identity}\"\n\
             tokenizer = \"kjv.tok\"\ntokenizer_sha256 = \"{}\"\n",
            sha(&read(file)),
            sha(&table),
            t.crc(),
            sha(&tok),
        ));
    }
    std::fs::write(dir.path().join("manifest.toml"), manifest).expect("write manifest");
    dir
}

async fn start(catalog: &Path) -> Daemon {
    let catalog = catalog.to_owned();
    Daemon::start(move |s| s.firmware = Some(catalog), |_| {}).await
}

fn staged(d: &Daemon) -> Vec<PathBuf> {
    let dir = d.dir.path().join("lib/firmware/fabricd/staged");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn model<'a>(models: &'a Value, name: &str) -> &'a Value {
    models["data"]["models"]
        .as_array()
        .expect("models")
        .iter()
        .find(|m| m["id"] == name)
        .unwrap_or_else(|| panic!("no model {name} in {models}"))
}

/// Loads `name` into slot 1 and expects a refusal of `kind` whose message
/// has `says`, with nothing staged.
async fn refused(d: &Daemon, name: &str, kind: &str, says: &str) {
    let before = staged(d);
    let r = control(d, json!({"cmd": "load", "model": name, "slot": 1})).await;
    assert_eq!(r["error"]["type"], kind, "{name}: {r}");
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(msg.contains(says), "{name}: {msg}");
    assert_eq!(staged(d), before, "{name}: something was staged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headerless_bin_for_another_part_is_unusable_and_refused() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let models = control(&d, json!({"cmd": "models"})).await;
    let m = model(&models, "zed-bin");
    assert_eq!(m["usable"], false, "{m}");
    let problem = m["problem"].as_str().expect("problem");
    assert!(
        problem.contains("IDCODE 0x03727093") && problem.contains("xck26-sfvc784-2LV-c"),
        "{problem}"
    );
    refused(&d, "zed-bin", "wrong_part", "IDCODE 0x03727093").await;
    // A headerless image for this board passes the same gate.
    assert_eq!(model(&models, "good-bin")["usable"], true, "{models}");
    let r = control(&d, json!({"cmd": "load", "model": "good-bin", "slot": 1})).await;
    assert_eq!(r["ok"], true, "{r}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_image_declared_partial_is_unusable_and_refused() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let models = control(&d, json!({"cmd": "models"})).await;
    for name in ["full-bin-as-partial", "full-bit-as-partial"] {
        assert_eq!(model(&models, name)["usable"], false, "{name}: {models}");
    }
    // Headerless: only its configuration stream's START says it is full.
    refused(&d, "full-bin-as-partial", "bad_image", "START").await;
    refused(&d, "full-bit-as-partial", "bad_image", "PARTIAL=TRUE").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_neither_partial_nor_full_costs_its_image_only() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let models = control(&d, json!({"cmd": "models"})).await;
    let m = model(&models, "odd-kind");
    assert_eq!(m["usable"], false, "{m}");
    let problem = m["problem"].as_str().expect("problem");
    assert!(problem.contains("kind = \"parital\""), "{problem}");
    for name in ["kjv", "fortunes"] {
        assert_eq!(model(&models, name)["usable"], true, "{name}: {models}");
    }
    refused(&d, "odd-kind", "bad_image", "parital").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_part_that_is_not_the_boards_is_refused() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let models = control(&d, json!({"cmd": "models"})).await;
    assert_eq!(model(&models, "zed-part")["usable"], false, "{models}");
    refused(&d, "zed-part", "wrong_part", "xc7z020clg484-1").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_built_for_another_slot_boundary_is_refused() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let models = control(&d, json!({"cmd": "models"})).await;
    let m = model(&models, "old-shell");
    assert_eq!(m["usable"], false, "{m}");
    let problem = m["problem"].as_str().expect("problem");
    assert!(
        problem.contains("UserID 0X5EED0001") && problem.contains("0x5eed0002"),
        "{problem}"
    );
    refused(&d, "old-shell", "wrong_shell", "UserID 0X5EED0001").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fabricctl_models_shows_unusable_images_with_their_reason() {
    let cat = catalog();
    let d = start(cat.path()).await;
    let socket = d.dir.path().join("run/fabricd.sock");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_fabricctl"))
            .arg("--socket")
            .arg(&socket)
            .arg("models")
            .output()
            .expect("fabricctl")
    })
    .await
    .expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name}: {text}"))
            .to_owned()
    };
    assert!(line("kjv").contains(" usable"), "{text}");
    for (name, why) in [
        ("zed-bin", "IDCODE 0x03727093"),
        ("full-bin-as-partial", "START"),
        ("odd-kind", "parital"),
        ("zed-part", "xc7z020clg484-1"),
    ] {
        let l = line(name);
        assert!(l.contains("UNUSABLE") && l.contains(why), "{name}: {l}");
    }
    d.stop().await;
}
