//! Servicing an interrupt (reading, checking and dispatching completion
//! entries) allocates nothing, on a coherent buffer and on one the driver
//! syncs by hand.
//!
//! One test, alone in its binary: `allocation-counter` becomes the
//! process's global allocator once linked. It counts per thread, which is
//! what makes the figure exact while the simulator's threads (the fabric's
//! part, not the driver's) allocate as they please: the driver runs on
//! this test's thread, on a current-thread runtime.

mod common;

use std::time::Duration;

use fabric_hw::contract::{CqeStatus, NO_STOP_TOKEN};
use fabric_hw::shell::{Params, RingConfig, Submission};
use fabric_sim::{SimConfig, Simulator};
use fabricd::fabric::{Driver, DriverEvent};

const PROMPT: [u32; 4] = [300, 301, 302, 303];
const MAX_TOKENS: u32 = 12;
/// Batches serviced and counted, after one that is not.
const ROUNDS: u32 = 4;

#[tokio::test(flavor = "current_thread")]
async fn servicing_an_interrupt_allocates_nothing() {
    for coherent in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = SimConfig::for_root(dir.path());
        config.firmware = Some(common::bitstreams());
        config.load = vec!["0=trigram-v2.bit".into(), "1=trigram-v2.bit".into()];
        config.time_scale = 0.05;
        config.poll_us = 50;
        config.dma_coherent = coherent;
        let sim = Simulator::start(config).expect("simulator");
        let attached = fabric_hw::attach(&sim.root(), RingConfig::default()).expect("attach");
        let (mut driver, _topology, tables) = Driver::new(attached);
        // The daemon's own commit puts a model in each slot.
        let catalog =
            fabricd::catalog::Catalog::load(&common::bitstreams(), None).expect("catalog");
        for (slot, model) in [(0, "kjv"), (1, "fortunes")] {
            fabricd::rotation::commit_model(
                driver.shell(),
                &tables,
                &catalog,
                catalog.get(model).expect("model"),
                slot,
                &fabricd::rotation::RotationConfig::default(),
            )
            .expect("the table commits");
        }
        let mut events = driver.events();
        // The commits changed the slots' states: their event, taken first.
        tokio::time::timeout(Duration::from_secs(10), driver.ready())
            .await
            .expect("the commits' event within 10 s")
            .expect("interrupt");
        driver.service(&mut events).expect("service");
        assert!(
            events
                .iter()
                .all(|e| matches!(e, DriverEvent::ShellEvent { .. })),
            "only the commits' event"
        );
        events.clear();
        let contexts = driver.shell().info().contexts() as u16;
        let mut tag = 0;
        let (mut services, mut token_events) = (0u32, 0u32);
        for round in 0..=ROUNDS {
            // Every context busy, half of them streaming: TOKENS and DONE
            // entries, several to an interrupt.
            let subs: Vec<Submission<'_>> = (0..contexts)
                .map(|ctx| {
                    tag += 1;
                    Submission {
                        tag,
                        ctx,
                        prompt: &PROMPT,
                        params: Params {
                            max_tokens: MAX_TOKENS,
                            temperature: 0.8,
                            seed: u64::from(tag),
                            stop_token: NO_STOP_TOKEN,
                            stream: ctx % 2 == 0,
                        },
                    }
                })
                .collect();
            driver.submit(&subs, &mut events).expect("submit");
            assert!(events.is_empty(), "nothing refused");
            let mut done = 0;
            while done < contexts {
                tokio::time::timeout(Duration::from_secs(10), driver.ready())
                    .await
                    .expect("an interrupt or the watchdog within 10 s")
                    .expect("interrupt");
                let counted = allocation_counter::measure(|| {
                    driver.service(&mut events).expect("service");
                });
                if round > 0 {
                    assert_eq!(
                        counted.count_total, 0,
                        "servicing an interrupt allocated (coherent buffer: {coherent}, \
                         round {round}): {counted:?}"
                    );
                    services += 1;
                }
                for ev in events.iter() {
                    match ev {
                        DriverEvent::Tokens { tokens, .. } => {
                            token_events += u32::from(!tokens.is_empty())
                        }
                        DriverEvent::Done(d) => {
                            assert_eq!(
                                (d.status, d.intact, d.n_tokens),
                                (CqeStatus::Ok, true, MAX_TOKENS),
                                "{d:?}"
                            );
                            done += 1;
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
                events.clear();
            }
        }
        assert!(
            services >= ROUNDS && token_events > 0,
            "the path was exercised: {services} services, {token_events} with tokens"
        );
        driver.stop().expect("stop");
    }
}
