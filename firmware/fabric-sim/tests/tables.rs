//! Models in DDR (contract section 7): a table committed to a slot, a
//! switch from one to another, and every way a commit or a table can be
//! wrong, each answered by the slot's state and FAULT_CODE while the slot
//! keeps what it can.

mod common;

use common::{bare_host, host, sim, sub, table, tokens_of, until_done, wait_for, Host, PROMPT};
use fabric_hw::contract::*;
use fabric_hw::shell::{hex, Completion};
use fabric_hw::tables::TableError;
use fabric_model::table::Table;
use std::time::Duration;

/// The tokens the engine must give for [`sub`]'s request of `n` tokens
/// with `model`'s table: the Rust engine, read for read.
fn expected(model: &str, n: u32) -> Vec<u32> {
    Table::from_bytes(&table(model))
        .expect("the catalog's table")
        .generate(&PROMPT, n, 0.8, 42, NO_STOP_TOKEN)
        .expect("the table answers every step")
}

/// Runs [`sub`]'s request of `n` tokens on context `ctx`: its tokens and
/// its status.
async fn run(h: &mut Host, tag: u32, ctx: u16, n: u32) -> (Vec<u32>, CqeStatus) {
    h.rings
        .submit(&h.shell, &[sub(tag, ctx, n, false)])
        .expect("submit");
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, tag).await;
    let status = all
        .completions
        .iter()
        .find_map(|c| match c {
            Completion::Done { tag: t, status, .. } if *t == tag => Some(*status),
            _ => None,
        })
        .expect("a completion for the tag");
    (tokens_of(&all), status)
}

/// `table` with word `at` set to `value`.
fn with_word(mut table: Vec<u8>, at: usize, value: u32) -> Vec<u8> {
    table[4 * at..4 * at + 4].copy_from_slice(&value.to_le_bytes());
    table
}

#[tokio::test]
async fn a_switch_commits_another_model_and_the_slot_serves_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    assert_eq!(
        run(&mut h, 1, 0, 10).await,
        (expected("kjv", 10), CqeStatus::Ok)
    );
    let loads = h.shell.slot(0).loads;

    let fortunes = Table::from_bytes(&table("fortunes")).expect("table");
    let c = h.commit(0, "fortunes").expect("the switch commits");
    assert_eq!(c.engine, Some(EngineId::TRIGRAM_V2));
    assert_eq!(
        c.crc,
        fortunes.crc(),
        "the CRC the engine computed as it read"
    );
    assert_eq!(
        c.identity,
        hex(&fortunes.identity()),
        "the identity it declares"
    );
    let s = h.shell.slot(0);
    assert_eq!((s.state, s.loads), (SlotState::Ready, loads + 1));
    assert_eq!(
        run(&mut h, 2, 0, 10).await,
        (expected("fortunes", 10), CqeStatus::Ok)
    );
}

#[tokio::test]
async fn a_commit_to_a_slot_not_quiesced_is_refused_and_it_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    let before = h.shell.slot(0);
    // The host's side refuses before writing a word of the region the
    // serving engine reads at every step.
    let err = h
        .tables
        .commit(&h.shell, 0, &table("fortunes"), 0, Duration::from_secs(10))
        .expect_err("refused");
    assert!(
        matches!(
            err,
            TableError::NotQuiesced {
                slot: 0,
                shutdown: 0
            }
        ),
        "{err}"
    );
    // The device's side: a commit written to the registers of a slot not
    // quiesced is refused too, and changes nothing but FAULT_CODE.
    let regs = SlotRegs::of(0);
    let commit = regs.committed.get(&h.regs) + 1;
    regs.table_commit.set(&h.regs, commit);
    wait_for("the refusal", Duration::from_secs(10), || {
        regs.committed.get(&h.regs) == commit
    });
    assert_eq!(REG_FAULT_CODE.get(&h.regs), FaultCode::CommitRefused as u32);
    let after = h.shell.slot(0);
    assert_eq!(
        (after.state, after.loads, after.identity, after.table_crc),
        (
            before.state,
            before.loads,
            before.identity,
            before.table_crc
        )
    );
    assert_eq!(
        run(&mut h, 1, 0, 6).await,
        (expected("kjv", 6), CqeStatus::Ok)
    );
}

#[tokio::test]
async fn a_table_written_over_under_a_serving_slot_changes_what_it_decodes() {
    // What the host must never do, and why: the engine reads its table
    // from DDR at every step, as on a board.
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    assert_eq!(
        run(&mut h, 1, 0, 6).await,
        (expected("kjv", 6), CqeStatus::Ok)
    );
    let mut zeros = table("kjv");
    zeros[64..].fill(0);
    let dma = fabric_hw::dma::DmaBuf::open(&sim.root(), "udmabuf-fabric").expect("the buffer");
    dma.write(h.tables.offset(0), &zeros).expect("write");
    dma.sync_for_device(h.tables.offset(0), zeros.len() as u64)
        .expect("sync");
    let (tokens, _) = run(&mut h, 2, 0, 6).await;
    assert_ne!(tokens, expected("kjv", 6));
}

#[tokio::test]
async fn a_table_its_region_cannot_hold_never_reaches_the_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 4 MiB: the rings, then two regions of under 2 MiB each.
    let sim = sim(dir.path(), |c| c.dma_size = 4 << 20);
    let h = bare_host(&sim);
    let err = h.commit(0, "kjv").expect_err("too big");
    assert!(
        matches!(err, TableError::RegionTooSmall { slot: 0, bytes, kv: 0, region } if bytes > region),
        "{err}"
    );
    assert_eq!(h.shell.slot(0).state, SlotState::NoModel);
    assert_eq!(h.shell.slot(0).loads, 0);
}

#[tokio::test]
async fn a_table_not_for_the_engine_leaves_the_slot_in_error_until_a_good_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    let good = table("fortunes");
    let region_words = (h.tables.region_bytes() / 4) as u32;
    for (what, bad) in [
        ("a bad magic", with_word(good.clone(), 0, 0x4654_4231)),
        (
            "another engine's",
            with_word(
                good.clone(),
                1,
                EngineId {
                    kind: 1,
                    version: 3,
                }
                .encode(),
            ),
        ),
        (
            "longer than its region",
            with_word(good.clone(), 2, region_words + 1),
        ),
    ] {
        let err = h.commit_bytes(0, &bad).expect_err(what);
        assert!(
            matches!(
                err,
                TableError::Failed {
                    slot: 0,
                    state: SlotState::Error(slot_error::BAD_TABLE)
                }
            ),
            "{what}: {err}"
        );
        let (_, status) = run(&mut h, 1, 0, 3).await;
        assert_eq!(status, CqeStatus::SlotNotReady, "{what}");
    }
    // The other slot served throughout, and a good table puts slot 0 back.
    assert_eq!(
        run(&mut h, 2, SLOT1, 6).await,
        (expected("fortunes", 6), CqeStatus::Ok)
    );
    h.commit_bytes(0, &good).expect("a good table");
    assert_eq!(
        run(&mut h, 3, 0, 6).await,
        (expected("fortunes", 6), CqeStatus::Ok)
    );
}

/// Slot 1's first context, with the default contexts per slot.
const SLOT1: u16 = 8;

#[tokio::test]
async fn a_read_past_the_tables_end_faults_the_request_and_the_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    assert_eq!(usize::from(SLOT1), h.shell.info().contexts_per_slot);
    let good = table("kjv");
    let words = (good.len() / 4) as u32;
    // The trigram index said to start past the table's end: the commit
    // reads the declared words and takes it, the first lookup cannot.
    let bad = with_word(good.clone(), 6, words + 64);
    h.commit_bytes(0, &bad).expect("the commit takes it");
    let (tokens, status) = run(&mut h, 1, 0, 4).await;
    assert_eq!((tokens.len(), status), (0, CqeStatus::Fault));
    assert_eq!(REG_FAULT_CODE.get(&h.regs), FaultCode::TableRead as u32);
    assert_eq!(
        h.shell.slot(0).state,
        SlotState::Error(slot_error::TABLE_READ)
    );
    // Slot 1 never noticed; slot 0 takes a good table again.
    assert_eq!(
        run(&mut h, 2, SLOT1, 6).await,
        (expected("fortunes", 6), CqeStatus::Ok)
    );
    h.commit_bytes(0, &good).expect("a good table");
    assert_eq!(
        run(&mut h, 3, 0, 6).await,
        (expected("kjv", 6), CqeStatus::Ok)
    );
}

/// Switches of slot 1 over and over, from a thread of their own as the
/// daemon's rotation runs, while slot 0 serves: every request of slot 0's
/// is answered in full. The table's cache clean and the descriptors' go to
/// the same u-dma-buf attribute from two mappings at once; a command lost
/// between them leaves a descriptor unseen, refused as stale.
#[tokio::test]
async fn switches_of_one_slot_lose_nothing_of_the_other_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let Host {
        shell,
        mut rings,
        mut irq,
        tables,
        ..
    } = host(&sim).await;
    let switcher = {
        let shell = shell.clone();
        std::thread::spawn(move || {
            let table = table("fortunes");
            for _ in 0..60 {
                shell
                    .quiesce(1, Duration::from_secs(10))
                    .expect("slot 1 quiesces");
                tables
                    .commit(&shell, 1, &table, 0, Duration::from_secs(10))
                    .expect("the switch commits");
                shell.set_quiesce(1, false);
            }
        })
    };
    let mut tag = 0;
    while !switcher.is_finished() {
        tag += 1;
        rings
            .submit(&shell, &[sub(tag, 0, 2, false)])
            .expect("submit");
        let all = until_done(&mut irq, &shell, &mut rings, tag).await;
        let status = all.completions.iter().find_map(|c| match c {
            Completion::Done { tag: t, status, .. } if *t == tag => Some(*status),
            _ => None,
        });
        assert_eq!(status, Some(CqeStatus::Ok), "request {tag}");
    }
    switcher.join().expect("the switcher");
    assert_eq!(sim.stats().stale_descriptors, 0);
    assert!(
        tag > 20,
        "slot 0 served while slot 1 switched: {tag} requests"
    );
}
