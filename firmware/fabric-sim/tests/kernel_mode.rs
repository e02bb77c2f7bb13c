//! `fabric-sim --kernel`, the device side of the real-kernel rig, over a
//! file laid out as physical memory: what the kernel's manager hands the
//! configuration port and which decoupler it set decide what is
//! configured, as `tests/kernel/modules/zynq_pcap_qemu.c` and the region
//! code do it on the rig.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use fabric_hw::bitstream;
use fabric_hw::contract::{SlotState, MAGIC};
use fabric_sim::kernel::{Device, Map, Refusal};
use fabric_sim::SimConfig;

const SHELL: u64 = 0x43c0_0000;
const DECOUPLERS: [u64; 2] = [0x43c1_0000, 0x43c2_0000];
const PORT: u64 = 0x4400_0000;
const BUFFER: u64 = 0x4800_0000;
const GIC: u64 = 0xf8f0_1000;

struct Pl {
    mem: File,
    device: Device,
    seq: u32,
    _dir: tempfile::TempDir,
}

impl Pl {
    fn new() -> Pl {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mem");
        let mem = File::create(&path).expect("create");
        // Sparse: as large as the highest address the device maps.
        mem.set_len(GIC + 0x1000).expect("size");
        let mut config = SimConfig::for_root(dir.path());
        config.time_scale = 0.0;
        config.dma_coherent = true;
        config.dma_phys = BUFFER;
        let map = Map {
            mem: path.clone(),
            shell: SHELL,
            decouplers: DECOUPLERS.to_vec(),
            port: PORT,
            port_size: 0x100_0000,
            buffer: BUFFER,
            gic_dist: GIC,
            irq: 61,
        };
        let device = Device::open(config, &map).expect("open");
        let mem = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .expect("reopen");
        Pl {
            mem,
            device,
            seq: 0,
            _dir: dir,
        }
    }

    fn word(&self, at: u64) -> u32 {
        let mut b = [0u8; 4];
        self.mem.read_exact_at(&mut b, at).expect("read");
        u32::from_le_bytes(b)
    }

    fn set(&self, at: u64, value: u32) {
        self.mem
            .write_all_at(&value.to_le_bytes(), at)
            .expect("write");
    }

    fn decouple(&self, slot: usize, on: bool) {
        self.set(DECOUPLERS[slot], u32::from(on));
    }

    /// Hands the port an image as the manager does (the data, then SEQ
    /// last) and runs the device until it answers: RESULT.
    fn load(&mut self, image: &[u8], partial: bool) -> u32 {
        self.seq += 1;
        self.mem.write_all_at(image, PORT + 0x1000).expect("image");
        self.set(PORT, 0x4746_4346);
        self.set(PORT + 0x08, u32::from(partial));
        self.set(PORT + 0x0c, image.len() as u32);
        self.set(PORT + 0x04, self.seq);
        let start = Instant::now();
        while self.word(PORT + 0x10) != self.seq {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the device never answered image {}",
                self.seq
            );
            self.device.step(Instant::now());
        }
        self.word(PORT + 0x14)
    }
}

fn image(name: &str) -> Vec<u8> {
    let bit = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../bitstreams")
            .join(name),
    )
    .expect("bitstream");
    bitstream::to_bin(&bit).expect("to .bin")
}

/// `name` rebuilt for `part`: the same model, another IDCODE.
fn for_part(name: &str, part: &str) -> Vec<u8> {
    use fabric_model::image::{self, ImageSpec};
    let bit = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../bitstreams")
            .join(name),
    )
    .expect("bitstream");
    let (config, payload) = image::payload(&bit).expect("payload");
    let spec = ImageSpec {
        design: "other",
        part,
        interface_id: fabric_hw::contract::SHELL_INTERFACE_ID,
        partial: !config.starts_up,
        date: "2026/12/02",
        time: "00:00:00",
    };
    let other = image::build_bit_from_payload(&payload, &spec).expect("build");
    bitstream::to_bin(&other).expect("to .bin")
}

#[test]
fn the_kernels_loads_configure_the_fabric_through_the_port_and_the_decouplers() {
    let mut pl = Pl::new();
    assert_eq!(pl.word(SHELL), 0, "unconfigured until a full image");
    let full = image("trigram-v2-full.bit");
    let engine = image("trigram-v2.bit");

    // A partial image before the shell is there configures nothing.
    pl.decouple(1, true);
    assert_eq!(pl.load(&engine, true), Refusal::NoRegionDecoupled as u32);
    pl.decouple(1, false);

    // The full image: the shell comes up with the engine in every slot and
    // no model in any (the tables are the host's to commit), the
    // decouplers (static logic) reset.
    pl.decouple(0, true);
    assert_eq!(pl.load(&full, false), 0);
    assert!(pl.device.configured());
    assert_eq!(pl.word(SHELL), MAGIC);
    assert_eq!(pl.word(DECOUPLERS[0]), 0);
    assert_eq!(pl.device.slot_state(0), Some(SlotState::NoModel));
    assert_eq!(pl.device.slot_state(1), Some(SlotState::NoModel));

    // A partial image goes to the one slot the kernel decoupled.
    pl.device.step(Instant::now());
    pl.decouple(1, true);
    pl.device.step(Instant::now());
    assert_eq!(pl.load(&engine, true), 0);
    assert_eq!(pl.device.slot_state(1), Some(SlotState::NoModel));
    pl.decouple(1, false);

    // With none decoupled it would overwrite serving logic; with both,
    // it has no place: refused, and the manager fails the load.
    assert_eq!(pl.load(&engine, true), Refusal::NoRegionDecoupled as u32);
    pl.decouple(0, true);
    pl.decouple(1, true);
    assert_eq!(pl.load(&engine, true), Refusal::RegionsAmbiguous as u32);

    // Built for another device: the IDCODE check refuses it, as the PCAP
    // does (UG470 "IDCODE check"), partial or full.
    pl.decouple(0, false);
    let other = for_part("trigram-v2.bit", "xc7z020clg484-1");
    assert_eq!(pl.load(&other, true), Refusal::BadImage as u32);
    pl.decouple(0, true);

    // Not an engine: the port refuses it, and the manager fails the load.
    // The shell cannot tell a refused image from one still going in (the
    // contract keeps no "bad image" code for that reason): the region,
    // decoupled, reads loading until the next image.
    pl.decouple(0, false);
    let mut garbage = engine.clone();
    garbage.truncate(256);
    assert_eq!(pl.load(&garbage, true), Refusal::BadImage as u32);
    assert_eq!(pl.device.slot_state(1), Some(SlotState::Loading));
    assert_eq!(pl.load(&engine, true), 0);
    assert_eq!(pl.device.slot_state(1), Some(SlotState::NoModel));
}

#[test]
fn a_region_the_kernel_decouples_reads_empty() {
    let mut pl = Pl::new();
    assert_eq!(pl.load(&image("trigram-v2-full.bit"), false), 0);
    pl.device.step(Instant::now());
    assert_eq!(pl.device.slot_state(0), Some(SlotState::NoModel));
    // The slot's overlay is removed: the region stays decoupled, cut off.
    pl.decouple(0, true);
    pl.device.step(Instant::now());
    assert_eq!(pl.device.slot_state(0), Some(SlotState::Empty));
}
