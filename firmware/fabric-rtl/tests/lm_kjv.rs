//! The served transformer, kjv-lm (`bitstreams/kjv-lm.flm`, the catalog's
//! committed weights), on the RTL engine: 50 random requests on every lane
//! at once (prompts, temperatures, seeds, stop tokens, cancels), each
//! request's tokens those of `fabric_model::lm::generate`.

#![cfg(feature = "verilated")]

mod lm_rig;

use fabric_model::lm::Weights;
use fabric_rtl::lm::{LmCommit, LmPort};
use lm_rig::{expected, random_descs, serve, Rig};

#[test]
fn fifty_random_requests_on_kjv_lm_are_the_definitions() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bitstreams/kjv-lm.flm");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let weights = Weights::from_bytes(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    let shape = weights.shape;
    let mut rig = Rig::new(
        weights,
        LmPort {
            latency: 64,
            stall_permille: 100,
            seed: 31,
        },
    );
    assert!(matches!(rig.commit(), LmCommit::Taken { .. }));
    // Prompts of up to 12 tokens and up to 12 tokens drawn: a head's keys
    // span up to 24 positions, 1.5 KB a head, a dozen bursts of the port.
    let descs = random_descs(&shape, 50, 12, 12, 3100);
    let got = serve(&mut rig, &descs);
    for (i, d) in descs.iter().enumerate() {
        assert_eq!(got[i], expected(&rig.weights, d), "request {i}: {d:?}");
    }
}
