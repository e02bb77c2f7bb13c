//! The shell driven through its interrupt: completions, streaming, cancel,
//! lost interrupts, corrupted output, refusals.

mod common;

use std::time::Duration;

use common::{bare_host, host, sim, sub, tokens_of, until_done, wait_for, ENGINE};
use fabric_hw::contract::*;
use fabric_hw::shell::{Completion, Submission};
use fabric_sim::device::Faults;

#[tokio::test]
async fn streaming_and_whole_give_the_same_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    h.rings
        .submit(&h.shell, &[sub(1, 0, 12, false)])
        .expect("submit");
    let whole = until_done(&mut h.irq, &h.shell, &mut h.rings, 1).await;
    h.rings
        .submit(&h.shell, &[sub(2, 1, 12, true)])
        .expect("submit");
    let streamed = until_done(&mut h.irq, &h.shell, &mut h.rings, 2).await;
    assert_eq!(tokens_of(&whole).len(), 12);
    assert_eq!(tokens_of(&whole), tokens_of(&streamed));
    let progress = streamed
        .completions
        .iter()
        .filter(|c| matches!(c, Completion::Tokens { .. }))
        .count();
    assert!(progress >= 1, "streaming posts progress entries");
    assert!(matches!(
        whole.completions.last(),
        Some(Completion::Done {
            intact: true,
            finish: Finish::Length,
            ..
        })
    ));
}

#[tokio::test]
async fn a_cancel_frees_the_context_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Real time: 256 tokens would take half a second.
    let sim = sim(dir.path(), |c| c.time_scale = 1.0);
    let mut h = host(&sim).await;
    h.rings
        .submit(&h.shell, &[sub(5, 0, 256, false)])
        .expect("submit");
    wait_for("the request to start", Duration::from_secs(5), || {
        h.shell.counters().active == 1
    });
    // The tokens the fabric had made when the cancel went in. It checks for
    // a cancel before each pass of decode steps, so only a pass already
    // under way can add any: natively none or one. Counted in tokens, not
    // wall-clock time, which qemu-user stretches (a pass that wakes late
    // catches up the steps it owes, at most an eighth of the request).
    let before = h.shell.counters().tokens;
    h.shell.cancel(0, 5);
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 5).await;
    let Some(Completion::Done {
        status, n_tokens, ..
    }) = all.completions.last()
    else {
        panic!("no done entry: {all:?}");
    };
    assert_eq!(*status, CqeStatus::Cancelled);
    assert!(
        n_tokens.saturating_sub(before) <= 32,
        "{n_tokens} of 256 tokens, {before} of them before the cancel"
    );
    let c = h.shell.counters();
    assert_eq!((c.cancelled, c.active), (1, 0));
    // The context takes new work right away.
    h.rings
        .submit(&h.shell, &[sub(6, 0, 2, false)])
        .expect("context free again");
}

#[tokio::test]
async fn a_lost_interrupt_is_recovered_by_draining_anyway() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    sim.inject(Faults {
        lose_irq: 1,
        ..Faults::default()
    });
    h.rings
        .submit(&h.shell, &[sub(8, 0, 3, false)])
        .expect("submit");
    wait_for(
        "the completion to be posted",
        Duration::from_secs(5),
        || REG_CQ_TAIL.get(&h.regs) == 1,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), h.irq.wait())
            .await
            .is_err(),
        "the interrupt was injected as lost"
    );
    assert_eq!(sim.stats().irqs_lost, 1);
    // What the daemon's watchdog does: drain without an interrupt, unmask.
    let mut out = h.rings.drained();
    h.rings.drain(&h.shell, &mut out).expect("drain");
    h.irq.unmask().expect("unmask");
    assert!(matches!(
        out.completions.as_slice(),
        [Completion::Done {
            tag: 8,
            intact: true,
            ..
        }]
    ));
    // And interrupts flow again.
    h.rings
        .submit(&h.shell, &[sub(9, 0, 3, false)])
        .expect("submit");
    until_done(&mut h.irq, &h.shell, &mut h.rings, 9).await;
}

#[tokio::test]
async fn unmasking_an_unmasked_line_never_fails() {
    // The daemon's watchdog unmasks after every drain, ten times a second
    // while a request runs, interrupt or not; to UIO an unmask of an
    // unmasked line is a no-op and a `write` that never fails. Half a
    // second of unmasks at a thousand a second is more than the socket
    // holds unread.
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    let mut pace = tokio::time::interval(Duration::from_millis(1));
    for i in 0..500 {
        pace.tick().await;
        if let Err(e) = h.irq.unmask() {
            panic!("unmask {i} of an unmasked line: {e:?}");
        }
    }
    // And an interrupt still comes for a completion.
    h.rings
        .submit(&h.shell, &[sub(11, 0, 3, false)])
        .expect("submit");
    until_done(&mut h.irq, &h.shell, &mut h.rings, 11).await;
}

#[tokio::test]
async fn corrupted_output_fails_its_crc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    sim.inject(Faults {
        corrupt: 1,
        ..Faults::default()
    });
    h.rings
        .submit(&h.shell, &[sub(4, 4, 6, false)])
        .expect("submit");
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 4).await;
    assert!(matches!(
        all.completions.last(),
        Some(Completion::Done {
            intact: false,
            status: CqeStatus::Ok,
            ..
        })
    ));
    h.rings
        .submit(&h.shell, &[sub(5, 4, 6, false)])
        .expect("submit");
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 5).await;
    assert!(
        matches!(
            all.completions.last(),
            Some(Completion::Done { intact: true, .. })
        ),
        "only one was corrupted"
    );
}

#[tokio::test]
async fn a_request_for_a_slot_that_is_not_ready_gets_a_typed_answer() {
    // Slot 1 empty (no engine), then slot 1 with the engine and no table:
    // neither runs a request, both answer it.
    for (load, state) in [
        (vec![format!("0={ENGINE}")], SlotState::Empty),
        (
            vec![format!("0={ENGINE}"), format!("1={ENGINE}")],
            SlotState::NoModel,
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = sim(dir.path(), |c| c.load = load);
        let mut h = bare_host(&sim);
        h.commit(0, "kjv").expect("kjv commits to slot 0");
        assert_eq!(h.shell.slot(1).state, state);
        // Slot 1's first context follows slot 0's.
        let ctx = h.shell.info().contexts_per_slot as u16;
        h.rings
            .submit(&h.shell, &[sub(11, ctx, 3, false)])
            .expect("submit");
        let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 11).await;
        assert!(
            matches!(
                all.completions.last(),
                Some(Completion::Done {
                    status: CqeStatus::SlotNotReady,
                    ..
                })
            ),
            "slot 1 {state:?}: {:?}",
            all.completions.last()
        );
    }
}

#[tokio::test]
async fn the_driver_refuses_what_the_fabric_cannot_take() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = sim(dir.path(), |_| {});
    let mut h = host(&sim).await;
    let long = vec![1u32; 5000];
    let bad = Submission {
        prompt: &long,
        ..sub(1, 0, 3, false)
    };
    let err = h
        .rings
        .submit(&h.shell, &[bad])
        .expect_err("prompt too long");
    assert!(err.to_string().contains("prompt length"), "{err}");
    let err = h
        .rings
        .submit(&h.shell, &[sub(2, 99, 3, false)])
        .expect_err("no such context");
    assert!(err.to_string().contains("ctx"), "{err}");
    h.rings
        .submit(&h.shell, &[sub(3, 0, 3, false)])
        .expect("ok");
    let err = h
        .rings
        .submit(&h.shell, &[sub(4, 0, 3, false)])
        .expect_err("busy");
    assert!(err.to_string().contains("still running tag 3"), "{err}");
}

#[tokio::test]
async fn a_submit_that_fails_part_way_advances_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A cached buffer, so every submit cleans the cache for the device.
    let sim = sim(dir.path(), |c| c.dma_coherent = false);
    let mut h = host(&sim).await;
    // The descriptors' sync is refused, after both prompts went out.
    sim.inject(Faults {
        refuse_ring_sync: 1,
        ..Faults::default()
    });
    let batch = [sub(21, 0, 3, false), sub(22, 1, 3, false)];
    let err = h
        .rings
        .submit(&h.shell, &batch)
        .expect_err("the ring's sync was refused");
    assert!(
        matches!(err, fabric_hw::shell::ShellError::Dma(_)),
        "a DMA error, which the daemon takes for the fabric failing: {err}"
    );
    // Nothing advanced: no context holds a tag, the doorbell never rang.
    assert_eq!((h.rings.running(0), h.rings.running(1)), (0, 0));
    assert_eq!(REG_SQ_TAIL.get(&h.regs), 0);
    // So the same batch goes in whole once the buffer answers again, and
    // the device reads only descriptors that were cleaned for it.
    h.rings
        .submit(&h.shell, &batch)
        .expect("the same batch again");
    let all = until_done(&mut h.irq, &h.shell, &mut h.rings, 21).await;
    let all = if all
        .completions
        .iter()
        .any(|c| matches!(c, Completion::Done { tag: 22, .. }))
    {
        all
    } else {
        until_done(&mut h.irq, &h.shell, &mut h.rings, 22).await
    };
    assert!(
        all.completions
            .iter()
            .filter(|c| matches!(
                c,
                Completion::Done {
                    status: CqeStatus::Ok,
                    intact: true,
                    ..
                }
            ))
            .count()
            >= 1,
        "{all:?}"
    );
    assert_eq!(sim.stats().stale_descriptors, 0);
}

#[test]
fn the_shells_device_shows_in_sysfs_only_once_its_interrupt_is_there() {
    // A daemon finds the shell through sysfs and opens its node and its
    // interrupt at once (fabricd probe, then fabricd serve, at boot). On a
    // real kernel the UIO device is whole before its uevent; so must the
    // simulated one be, however soon after it appears someone looks.
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};

    let dir = tempfile::tempdir().expect("tempdir");
    let root = fabric_hw::Root::new(dir.path());
    let name = root.uio_class().join("uio0/name");
    let irq = root.dev("uio0.irq");
    let started = Arc::new(AtomicBool::new(false));
    let watcher = {
        let started = started.clone();
        std::thread::spawn(move || loop {
            if name.exists() {
                let fd = socket(
                    AddressFamily::Unix,
                    SockType::SeqPacket,
                    SockFlag::SOCK_CLOEXEC,
                    None,
                )
                .expect("socket");
                let addr = UnixAddr::new(&irq).expect("addr");
                return connect(fd.as_raw_fd(), &addr).map_err(|e| {
                    format!("{} in sysfs, but {}: {e}", name.display(), irq.display())
                });
            }
            if started.load(Ordering::SeqCst) && !name.exists() {
                return Err("the simulator started without the shell's device".into());
            }
            std::hint::spin_loop();
        })
    };
    let s = sim(dir.path(), |_| {});
    started.store(true, Ordering::SeqCst);
    let seen = watcher.join().expect("join");
    drop(s);
    seen.expect("the interrupt exists once sysfs shows the device");
}
