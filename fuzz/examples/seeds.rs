//! Writes the seed corpora, `fuzz/corpus/<target>/`, from the repository's
//! own files and the crates' own writers, so a seed is what the daemon
//! meets: `cargo run --example seeds` in `fuzz/` (stable is enough; needs
//! `dtc`). Seeds are small (a few KB a target); libFuzzer grows its corpus
//! elsewhere (`scripts/fuzz` keeps it under `fuzz/out/`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use fabric_hw::bitstream::{self, config_preamble, write_bit};
use fabric_hw::devtree::DtNode;
use fabricd::control::Command;
use fabricd::stats::{frame, ClientSketch, WindowRecord, VERSION};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = repo.join("fuzz/corpus");
    let seeds = Seeds(corpus);
    completion_bodies(&seeds)?;
    bitstreams(&seeds, &repo)?;
    let board = device_trees(&seeds, &repo)?;
    live_tree(&seeds, &board)?;
    stats_frames(&seeds)?;
    seeds.write(
        "manifest",
        "bitstreams",
        &fs::read(repo.join("bitstreams/manifest.toml"))?,
    )?;
    control_lines(&seeds)?;
    request_heads(&seeds)?;
    tables(&seeds)?;
    tokenizers(&seeds)?;
    Ok(())
}

struct Seeds(PathBuf);

impl Seeds {
    fn write(&self, target: &str, name: &str, bytes: &[u8]) -> Result<()> {
        let dir = self.0.join(target);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(name), bytes)?;
        Ok(())
    }
}

/// The README's requests, and one with every field the parser reads.
fn completion_bodies(s: &Seeds) -> Result<()> {
    for (name, body) in [
        (
            "readme",
            r#"{"model": "kjv", "prompt": "And God said", "max_tokens": 16, "seed": 1}"#,
        ),
        (
            "default",
            r#"{"model": "default", "prompt": "And God said", "max_tokens": 16}"#,
        ),
        (
            "every-field",
            r#"{"model":"kjv","prompt":["In the"],"max_tokens":8,"temperature":0.7,"seed":-3,"stop":["\n","."],"stream":true,"stream_options":{"include_usage":true},"n":1,"best_of":1,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"echo":false,"logprobs":null,"suffix":"","logit_bias":{},"user":"u1","session":"typist-7","session_seq":42,"deadline_ms":1000,"ignore_eos":false}"#,
        ),
        (
            "typing",
            r#"{"model":"kjv","prompt":"And the ea","max_tokens":4,"temperature":0,"session":"page-1","session_seq":9}"#,
        ),
    ] {
        s.write("completion_body", name, body.as_bytes())?;
    }
    Ok(())
}

/// A small tokenizer's file, its length in front, then text to encode
/// (the `tokenizer` target's input).
fn tokenizers(s: &Seeds) -> Result<()> {
    use fabric_model::tokenizer::Tokenizer;
    let t = Tokenizer::new(vec![
        b"And".to_vec(),
        b" God".to_vec(),
        b" said".to_vec(),
        b",".to_vec(),
        "\u{e9}".as_bytes().to_vec(),
        vec![0xC3],
    ]);
    let file = t.to_bytes();
    for (name, text) in [
        (
            "genesis",
            "And God said, Let there be light: and there was light.",
        ),
        ("no-text", ""),
    ] {
        let mut seed = u16::try_from(file.len())?.to_le_bytes().to_vec();
        seed.extend_from_slice(&file);
        seed.extend_from_slice(text.as_bytes());
        s.write("tokenizer", name, &seed)?;
    }
    Ok(())
}

/// Small tables as `mktable` writes them (the shipped ones are 2.4 MB):
/// a model of a few hundred short documents, and one of a single token,
/// whose indexes are empty.
fn tables(s: &Seeds) -> Result<()> {
    use fabric_model::ngram::{Model, Pruning};
    use fabric_model::table::Table;
    let mut x = 3u64;
    let mut next = move || {
        // SplitMix64, as the engine draws.
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let docs: Vec<Vec<u32>> = (0..60)
        .map(|_| {
            (0..(next() % 12 + 1))
                .map(|_| 300 + (next() % 24) as u32)
                .collect()
        })
        .collect();
    let pruning = Pruning {
        trigram_min_count: 1,
        ..Pruning::default()
    };
    for (name, docs) in [("small", docs), ("one-token", vec![vec![300]])] {
        let model = Model::train(name, 400, &docs, pruning);
        s.write(
            "table",
            &format!("{name}.ftb"),
            &Table::build(&model)?.to_bytes(),
        )?;
    }
    Ok(())
}

/// The shipped images' headers, with the start of their configuration data
/// (the whole files are a megabyte each): a `.bit`, and its `.bin`.
fn bitstreams(s: &Seeds, repo: &Path) -> Result<()> {
    for name in ["trigram-v2", "trigram-v2-full"] {
        let bit = fs::read(repo.join(format!("bitstreams/{name}.bit")))?;
        let h = bitstream::parse_header(&bit)?;
        let info = bitstream::inspect(&bit)?;
        let data = &bit[h.data_offset..];
        let keep = (info.sync_offset + 64).min(data.len());
        let small = write_bit(&h.design, &h.part, &h.date, &h.time, &data[..keep]);
        s.write("bitstream", &format!("{name}.bit"), &small)?;
        s.write(
            "bitstream",
            &format!("{name}.bin"),
            &bitstream::to_bin(&small)?,
        )?;
    }
    let mut data = config_preamble();
    data.extend_from_slice(&[0x30, 0x01, 0x80, 0x01, 0x04, 0x7e, 0x40, 0x93]);
    s.write(
        "bitstream",
        "preamble.bit",
        &write_bit(
            "top;UserID=0XFFFFFFFF",
            "xc7z020clg484-1",
            "2026/12/02",
            "10:00:00",
            &data,
        ),
    )?;
    Ok(())
}

/// The simulated board's tree and the slot and shell overlays, compiled by
/// `dtc` as the build does. Returns the board's tree.
fn device_trees(s: &Seeds, repo: &Path) -> Result<DtNode> {
    let sources = repo.join("device-tree");
    let mut board = None;
    for name in ["sim-board.dts", "slot0.dtso", "fabricd-shell-zed.dtso"] {
        let out = Process::new("dtc")
            .args(["-q", "-@", "-i"])
            .arg(&sources)
            .args(["-I", "dts", "-O", "dtb"])
            .arg(sources.join(name))
            .output()
            .map_err(|e| format!("dtc (apt-get install device-tree-compiler): {e}"))?;
        if !out.status.success() {
            return Err(format!("dtc {name}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let blob_name = name.replace(".dtso", ".dtbo").replace(".dts", ".dtb");
        s.write("device_tree", &blob_name, &out.stdout)?;
        if name == "sim-board.dts" {
            board = Some(DtNode::from_blob(&out.stdout, Path::new(name))?);
        }
    }
    board.ok_or_else(|| "no board tree".into())
}

/// The board's tree as `/proc/device-tree` shows it, packed as the
/// `live_tree` target reads it: path, NUL, big-endian u16 length, bytes.
fn live_tree(s: &Seeds, board: &DtNode) -> Result<()> {
    let mut packed = Vec::new();
    for node in board.walk() {
        for (prop, value) in &node.props {
            let path = format!("{}/{prop}", node.path.trim_start_matches('/'));
            packed.extend_from_slice(path.trim_start_matches('/').as_bytes());
            packed.push(0);
            packed.extend_from_slice(&u16::try_from(value.len())?.to_be_bytes());
            packed.extend_from_slice(value);
        }
    }
    s.write("live_tree", "sim-board", &packed)
}

/// Frames as the daemon writes them: a closed window, a checkpoint of the
/// next, and a torn tail. Written under `-v2` names: `two-windows` and
/// `torn-tail` are kept as frames of version 1, which are still read.
fn stats_frames(s: &Seeds) -> Result<()> {
    let window = |index: u64, closed: bool| WindowRecord {
        version: VERSION,
        boot_id: 0x5eed_0001_cafe_f00d,
        index,
        start_ms: 1_764_662_400_000 + 1_800_000 * index,
        end_ms: 1_764_662_400_000 + 1_800_000 * (index + 1),
        closed,
        peak_connections: 64,
        unique_clients: 12,
        requests: BTreeMap::from([
            ("ok".to_owned(), 9_800),
            ("overloaded".to_owned(), 120),
            ("deadline_exceeded".to_owned(), 3),
        ]),
        overlapped: 40,
        tokens_in: 98_000,
        tokens_out: 156_800,
        peak_in_flight: 2,
        two_plus_ms: 1_200_000,
        latency_all: vec![(17, 9_000), (120, 700), (25_000, 40)],
        latency_clean: vec![(17, 9_000), (120, 700)],
        dropped_events: 0,
        window_ms: 1_800_000,
        clients: Some(ClientSketch {
            key_id: 0x0123_4567_89ab_cdef,
            registers: vec![(7, 1), (1_000, 3), (4_095, 2)],
        }),
    };
    let mut log = frame(&window(0, true));
    log.extend(frame(&window(1, false)));
    s.write("stats_frames", "two-windows-v2", &log)?;
    let torn = frame(&window(2, true));
    log.extend_from_slice(&torn[..torn.len() / 2]);
    s.write("stats_frames", "torn-tail-v2", &log)
}

/// Every command as `fabricctl` sends it, and an answer of each kind.
fn control_lines(s: &Seeds) -> Result<()> {
    for cmd in [
        Command::Status,
        Command::Models,
        Command::Stats {
            since_ms: Some(1_764_662_400_000),
            merge: false,
        },
        Command::Checkpoint,
        Command::Load {
            model: "kjv".into(),
            slot: Some(1),
            force: true,
            full: false,
            reflash: true,
        },
        Command::Rotate,
        Command::Drain {
            slot: Some(0),
            board: false,
        },
        Command::Resume {
            slot: None,
            board: true,
        },
    ] {
        s.write("control_line", cmd.name(), &cmd.to_line())?;
    }
    s.write(
        "control_line",
        "answer-ok",
        b"{\"ok\":true,\"data\":{\"slots\":[{\"model\":\"kjv\"}]}}\n",
    )?;
    s.write(
        "control_line",
        "answer-refused",
        b"{\"ok\":false,\"error\":{\"type\":\"slot_busy\",\"message\":\"slot 1 is loading\"}}\n",
    )?;
    Ok(())
}

/// Request heads: completions the daemon reads before hyper, and ones it
/// leaves to hyper.
fn request_heads(s: &Seeds) -> Result<()> {
    let body = r#"{"model":"kjv","prompt":"In the"}"#;
    for (name, head) in [
        (
            "completion",
            format!(
                "POST /v1/completions HTTP/1.1\r\nhost: board\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            ),
        ),
        (
            "bare-lf",
            "POST /v1/completions HTTP/1.0\ncontent-length: 0\n\n".to_owned(),
        ),
        (
            "chunked",
            "POST /v1/completions HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_owned(),
        ),
        (
            "expect",
            "POST /v1/completions HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 100000000\r\n\r\n".to_owned(),
        ),
        (
            "healthz",
            "GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n".to_owned(),
        ),
    ] {
        s.write("request_head", name, head.as_bytes())?;
    }
    Ok(())
}
