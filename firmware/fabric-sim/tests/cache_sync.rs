//! A forgotten cache sync must fail, not work by accident.
//!
//! These tests play a careless driver with the hardware layer's own pieces:
//! they do every step of the contract's submit or complete sequence except
//! one sync, and check that the simulated fabric (or the host's checks) catch
//! it. The control cases do the same with the sync and pass.

mod common;

use std::time::Duration;

use common::{host, sim, wait_for};
use fabric_hw::barrier::io_wmb;
use fabric_hw::contract::*;
use fabric_hw::shell::{Completion, Params, Submission};

const PROMPT: [u32; 3] = [300, 301, 302];

fn sqe(host: &common::Host, seq: u32, tag: u32) -> Sqe {
    let dma = host.rings.dma();
    let l = host.rings.layout();
    Sqe {
        seq,
        opcode: OP_GENERATE,
        slot: 0,
        flags: 0,
        tag,
        ctx: 0,
        prompt_addr: dma.phys_addr() + l.prompts,
        prompt_len: PROMPT.len() as u32,
        max_tokens: 4,
        output_addr: dma.phys_addr() + l.outputs,
        output_cap: host.shell.info().max_output,
        temperature: 0.0,
        seed: 1,
        stop_token: NO_STOP_TOKEN,
    }
}

#[tokio::test]
async fn a_descriptor_not_flushed_for_the_device_is_refused_as_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let host = host(&sim).await;
    let dma = host.rings.dma();
    let l = *host.rings.layout();
    // Prompt written and flushed; descriptor written but NOT flushed.
    dma.write_u32s(l.prompts, &PROMPT).expect("prompt");
    dma.sync_for_device(l.prompts, 12).expect("prompt sync");
    dma.write(l.sq, &sqe(&host, 0, 7).encode())
        .expect("descriptor");
    io_wmb();
    REG_SQ_TAIL.set(&host.regs, 1);
    wait_for(
        "the device to read the descriptor",
        Duration::from_secs(5),
        || REG_SQ_HEAD.get(&host.regs) == 1,
    );
    assert_eq!(sim.stats().stale_descriptors, 1);
    assert_eq!(
        REG_FAULT_CODE.get(&host.regs),
        FaultCode::StaleDescriptor as u32
    );
    assert_eq!(
        host.shell.counters().submitted,
        0,
        "a stale descriptor must not start work"
    );
}

#[tokio::test]
async fn the_same_descriptor_flushed_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let host = host(&sim).await;
    let dma = host.rings.dma();
    let l = *host.rings.layout();
    dma.write_u32s(l.prompts, &PROMPT).expect("prompt");
    dma.sync_for_device(l.prompts, 12).expect("prompt sync");
    dma.write(l.sq, &sqe(&host, 0, 7).encode())
        .expect("descriptor");
    dma.sync_for_device(l.sq, SQE_LEN as u64)
        .expect("descriptor sync");
    io_wmb();
    REG_SQ_TAIL.set(&host.regs, 1);
    wait_for("the request to complete", Duration::from_secs(5), || {
        host.shell.counters().completed == 1
    });
    assert_eq!(sim.stats().stale_descriptors, 0);
}

#[tokio::test]
async fn completions_and_tokens_not_invalidated_for_the_cpu_read_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut host = host(&sim).await;
    let sub = Submission {
        tag: 9,
        ctx: 0,
        prompt: &PROMPT,
        params: Params {
            max_tokens: 4,
            temperature: 0.0,
            seed: 1,
            stop_token: NO_STOP_TOKEN,
            stream: false,
        },
    };
    host.rings.submit(&host.shell, &[sub]).expect("submit");
    wait_for(
        "the completion to be posted",
        Duration::from_secs(5),
        || REG_CQ_TAIL.get(&host.regs) == 1,
    );
    let dma = host.rings.dma();
    let l = *host.rings.layout();
    // Without an invalidate, the CPU still sees the zeroed ring.
    let mut raw = [0u8; CQE_LEN];
    dma.read(l.cq, &mut raw).expect("read");
    assert!(matches!(
        Cqe::decode(&raw, 0),
        Err(DescriptorError::Stale { .. })
    ));
    // With it, the entry is there; but the tokens, still not invalidated,
    // fail the output CRC.
    dma.sync_for_cpu(l.cq, CQE_LEN as u64).expect("cq sync");
    dma.read(l.cq, &mut raw).expect("read");
    let cqe = Cqe::decode(&raw, 0).expect("entry after sync");
    assert_eq!((cqe.tag, cqe.n_tokens, cqe.status), (9, 4, CqeStatus::Ok));
    let mut tokens = [0u32; 4];
    dma.read_u32s(l.outputs, &mut tokens).expect("tokens");
    assert_ne!(
        tokens_crc(&tokens),
        cqe.crc,
        "unsynced tokens must not pass the CRC"
    );
    // The driver's own drain does both syncs and gets intact tokens.
    let mut out = host.rings.drained();
    host.rings.drain(&host.shell, &mut out).expect("drain");
    match out.completions.as_slice() {
        [Completion::Done {
            tag: 9,
            intact: true,
            n_tokens: 4,
            tokens,
            ..
        }] => {
            assert_eq!(tokens_crc(out.tokens(*tokens)), cqe.crc);
        }
        other => panic!("unexpected completions {other:?}"),
    }
}

#[tokio::test]
async fn a_coherent_buffer_needs_no_syncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |c| c.dma_coherent = true);
    let mut host = host(&sim).await;
    assert!(host.rings.dma().is_coherent());
    let sub = Submission {
        tag: 3,
        ctx: 1,
        prompt: &PROMPT,
        params: Params {
            max_tokens: 5,
            temperature: 0.0,
            seed: 1,
            stop_token: NO_STOP_TOKEN,
            stream: false,
        },
    };
    host.rings.submit(&host.shell, &[sub]).expect("submit");
    wait_for("the completion", Duration::from_secs(5), || {
        REG_CQ_TAIL.get(&host.regs) == 1
    });
    let mut out = host.rings.drained();
    host.rings.drain(&host.shell, &mut out).expect("drain");
    assert!(matches!(
        out.completions.as_slice(),
        [Completion::Done {
            tag: 3,
            intact: true,
            n_tokens: 5,
            ..
        }]
    ));
    let stats = sim.stats();
    assert_eq!((stats.syncs_for_device, stats.syncs_for_cpu), (0, 0));
}

#[tokio::test]
async fn an_output_the_device_cannot_write_ends_the_request_at_its_first_token() {
    // A device cannot know where DDR ends: the descriptor is accepted, and
    // the first write of a token fails (contract 1.1, section 6).
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let host = host(&sim).await;
    let dma = host.rings.dma();
    let l = *host.rings.layout();
    dma.write_u32s(l.prompts, &PROMPT).expect("prompt");
    dma.sync_for_device(l.prompts, 12).expect("prompt sync");
    let mut bad = sqe(&host, 0, 7);
    bad.output_addr = dma.phys_addr() + dma.size() + 0x10_0000;
    dma.write(l.sq, &bad.encode()).expect("descriptor");
    dma.sync_for_device(l.sq, SQE_LEN as u64)
        .expect("descriptor sync");
    io_wmb();
    REG_SQ_TAIL.set(&host.regs, 1);
    wait_for("the request to end", Duration::from_secs(5), || {
        host.shell.counters().errors >= 1 && host.shell.counters().active == 0
    });
    let c = host.shell.counters();
    assert_eq!((c.submitted, c.completed, c.tokens), (1, 0, 0), "{c:?}");
    assert_eq!(
        REG_FAULT_CODE.get(&host.regs),
        FaultCode::DecoderFault as u32
    );
}
