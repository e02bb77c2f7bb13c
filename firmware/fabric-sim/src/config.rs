//! The simulator's settings (its command line).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::SimError;

/// Physical address of the DMA buffer. Above 4 GiB on purpose: it catches
/// code that keeps a physical address in a 32-bit `usize`, which the 32-bit
/// Zynq-7000 build would otherwise only find on hardware.
pub const DMA_PHYS: u64 = 0x8_7000_0000;

/// `fabric-sim`: a Zynq board's fabric, behind the same kernel interfaces.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "fabric-sim",
    version,
    about = "Simulate the fabricd FPGA fabric behind fake kernel interfaces"
)]
pub struct SimConfig {
    /// Directory to lay the board's /sys, /dev, /proc/device-tree, configfs
    /// and /lib/firmware out in. Created if missing. Not with `--kernel`.
    #[arg(
        long = "root",
        value_name = "DIR",
        required_unless_present = "kernel",
        conflicts_with = "kernel"
    )]
    root_arg: Option<PathBuf>,
    /// `--root` (empty with `--kernel`).
    #[arg(skip)]
    pub root: PathBuf,
    /// Multiplies every simulated duration (0 makes the fabric infinitely
    /// fast; 0.01 runs a 25 s reflash in 250 ms).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// PR slots in the shell.
    #[arg(long, default_value_t = 2)]
    pub slots: u8,
    /// Requests a slot decodes at once.
    #[arg(long, default_value_t = 4)]
    pub lanes: u8,
    /// Requests a slot holds at once (decoding, or waiting on-chip for a
    /// lane); 0 means twice the lanes.
    #[arg(long, default_value_t = 0)]
    pub contexts: u8,
    /// Most prompt tokens a request may carry.
    #[arg(long, default_value_t = 1024)]
    pub max_prompt: u32,
    /// Most output tokens a request may ask for.
    #[arg(long, default_value_t = 256)]
    pub max_output: u32,
    /// A fixed fabric time per prompt token, in microseconds (before
    /// scaling), whatever the engine and the model (50 when only
    /// `--decode-us` is given). By default each slot takes its engine's
    /// cycles at the fabric's clock (`--clock-mhz`).
    #[arg(long)]
    pub prefill_us: Option<u64>,
    /// A fixed fabric time per output token, in microseconds (before
    /// scaling), for each decoding request (1900 when only `--prefill-us`
    /// is given). By default each slot takes its engine's cycles.
    #[arg(long)]
    pub decode_us: Option<u64>,
    /// The fabric's clock in MHz, for the engines' cycles: by default the
    /// clock the RTL is synthesized for on the board `--part` names (200
    /// on a K26, 100 on a Zynq-7000).
    #[arg(long)]
    pub clock_mhz: Option<u32>,
    /// How long a full reconfiguration darkens the fabric, in seconds
    /// (before scaling).
    #[arg(long, default_value_t = 25.0)]
    pub full_reconfig_secs: f64,
    /// Partial reconfiguration speed: a slot stays dark for the image's size
    /// divided by this (before scaling).
    #[arg(long, default_value_t = 400_000)]
    pub pr_bytes_per_sec: u64,
    /// How fast a slot's engine reads a committed table in: its HP port's
    /// bytes a second (64 bits at 100 MHz), before scaling.
    #[arg(long, default_value_t = 800_000_000)]
    pub table_bytes_per_sec: u64,
    /// The FPGA part the board carries.
    #[arg(long, default_value = "xck26-sfvc784-2LV-c")]
    pub part: String,
    /// The static shell's interface id (partial images must match it; the
    /// default is `contract::SHELL_INTERFACE_ID`, the shell `rtl/` builds).
    #[arg(long, default_value = "0x5EED0002", value_parser = parse_u32)]
    pub interface_id: u32,
    /// Size of the u-dma-buf buffer in bytes: the rings and arenas, then a
    /// region for each slot's table.
    #[arg(long, default_value_t = 16 << 20)]
    pub dma_size: u64,
    /// Make the DMA buffer coherent (no cache maintenance needed).
    #[arg(long)]
    pub dma_coherent: bool,
    /// Give the DMA buffer as a second map of the shell's UIO device (reg
    /// entry "buffer", mapped uncached, as on a kernel without u-dma-buf)
    /// instead of a u-dma-buf device.
    #[arg(long)]
    pub uio_buffer: bool,
    /// Where configfs is mounted on the simulated board.
    #[arg(long, default_value = "/sys/kernel/config")]
    pub configfs: String,
    /// Simulate a kernel without configfs overlays (full reconfiguration only).
    #[arg(long)]
    pub no_configfs: bool,
    /// Simulate a mainline kernel's FPGA manager: no `firmware` attribute,
    /// so a full load is the shell overlay applied again with another image
    /// on the base region (the simulated board is linux-xlnx's otherwise).
    #[arg(long)]
    pub mainline: bool,
    /// A catalog directory (`manifest.toml` and its files) to install as the
    /// board image would, into `/lib/firmware/fabricd`.
    #[arg(long, value_name = "DIR")]
    pub firmware: Option<PathBuf>,
    /// Program a slot at power-on, as a boot image would: SLOT=FILE (.bit or
    /// .bin; a plain name is looked up in `/lib/firmware/fabricd`).
    /// Repeatable.
    #[arg(long = "load", value_name = "SLOT=FILE")]
    pub load: Vec<String>,
    /// How often the sequencer looks at the doorbells, in microseconds.
    #[arg(long, default_value_t = 50)]
    pub poll_us: u64,
    /// Exit when the process that started us dies (`fabricd serve --sim`).
    #[arg(long, hide = true)]
    pub die_with_parent: bool,
    /// After a full reconfiguration, bring the shell's UIO device back under
    /// the next number (uio0 becomes uio1), as a kernel that re-registers
    /// it does: for testing that the daemon finds it again by name.
    #[arg(long, hide = true)]
    pub renumber_uio: bool,
    /// The shell and the slots as the RTL (`rtl/`), Verilated, behind the
    /// same board files (needs fabric-sim built with the `rtl` feature;
    /// `FABRICD_SIM_RTL=1` in the environment does the same).
    #[arg(long)]
    pub rtl: bool,
    /// Report this shell version (MAJOR.MINOR), for testing refusals.
    #[arg(long, default_value = "2.0", hide = true)]
    pub shell_version: String,
    /// Report this MAGIC, for testing refusals.
    #[arg(long, default_value = "0x46414252", value_parser = parse_u32, hide = true)]
    pub shell_magic: u32,
    /// The DMA buffer's physical address (the simulated board's; `--kernel`
    /// takes `--buffer-addr`).
    #[arg(skip = DMA_PHYS)]
    pub dma_phys: u64,
    /// Play the PL on a real kernel, through physical memory, instead of
    /// laying out a simulated board (the real-kernel rig; see
    /// `fabric_sim::kernel`). The addresses below are the shell design's.
    #[arg(long)]
    pub kernel: bool,
    #[command(flatten)]
    pub pl: PlArgs,
}

/// Where the PL's pieces are, for `--kernel` (defaults: the rig's
/// Zynq-7000 design, `tests/kernel/shell-rig.dtso`).
#[derive(clap::Args, Debug, Clone)]
pub struct PlArgs {
    /// The file that is physical memory.
    #[arg(long, default_value = "/dev/mem")]
    pub mem: PathBuf,
    /// The shell's register window.
    #[arg(long, default_value = "0x43c00000", value_parser = parse_u64)]
    pub shell_addr: u64,
    /// Each slot's PR decoupler, in slot order.
    #[arg(long = "decoupler-addr", value_parser = parse_u64, default_values = ["0x43c10000", "0x43c20000"])]
    pub decoupler_addr: Vec<u64>,
    /// The configuration port (`zynq_pcap_qemu`'s `port`).
    #[arg(long, default_value = "0x44000000", value_parser = parse_u64)]
    pub port_addr: u64,
    #[arg(long, default_value = "0x1000000", value_parser = parse_u64)]
    pub port_size: u64,
    /// The DMA buffer (`--dma-size` bytes).
    #[arg(long, default_value = "0x48000000", value_parser = parse_u64)]
    pub buffer_addr: u64,
    /// The GIC distributor.
    #[arg(long, default_value = "0xf8f01000", value_parser = parse_u64)]
    pub gic_dist: u64,
    /// The shell's interrupt id (SPI 29 is id 61).
    #[arg(long, default_value_t = 61)]
    pub irq: u32,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

fn parse_u32(s: &str) -> Result<u32, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

impl SimConfig {
    /// Takes `--root` from the parsed command line (clap fills `root_arg`;
    /// everything else reads `root`).
    pub fn resolve_root(&mut self) {
        if let Some(root) = &self.root_arg {
            self.root = root.clone();
        }
    }

    /// Default settings for a root directory.
    pub fn for_root(root: impl Into<PathBuf>) -> SimConfig {
        // Parsing our own defaults cannot fail.
        let mut c = SimConfig::parse_from(["fabric-sim", "--root", "."]);
        c.root = root.into();
        c.root_arg = Some(c.root.clone());
        // Fixed times, as before the engines had their own: what a test
        // checks (a cancel that lands mid-request, a stream in several
        // chunks) must not hang on how fast an engine is.
        c.prefill_us = Some(50);
        c.decode_us = Some(1900);
        c
    }

    /// `base` scaled by the time scale.
    pub fn scaled(&self, base: Duration) -> Duration {
        base.mul_f64(self.time_scale.max(0.0))
    }

    /// The fixed times `--prefill-us` and `--decode-us` ask for, scaled:
    /// (a prompt token's, an output token's); `None` when each engine
    /// takes its own.
    pub fn fixed_times(&self) -> Option<(Duration, Duration)> {
        if self.prefill_us.is_none() && self.decode_us.is_none() {
            return None;
        }
        let us = |v: Option<u64>, default| self.scaled(Duration::from_micros(v.unwrap_or(default)));
        Some((us(self.prefill_us, 50), us(self.decode_us, 1900)))
    }

    /// The fabric's clock in Hz: `--clock-mhz`, else the board's.
    pub fn clock_hz(&self) -> u64 {
        let mhz = self.clock_mhz.unwrap_or_else(|| {
            if self.part.starts_with("xc7") {
                100
            } else {
                200
            }
        });
        u64::from(mhz.max(1)) * 1_000_000
    }

    /// Contexts per slot.
    pub fn contexts_per_slot(&self) -> usize {
        match self.contexts {
            0 => usize::from(self.lanes) * 2,
            n => usize::from(n),
        }
    }

    /// The device `--part` names, whose IDCODE each stream must write; a
    /// part with no known IDCODE cannot be simulated strictly, so it is
    /// refused at start.
    pub fn device(&self) -> Result<&'static fabric_hw::bitstream::idcode::Device, SimError> {
        fabric_hw::bitstream::idcode::by_part(&self.part).ok_or_else(|| {
            let known: Vec<&str> = fabric_hw::bitstream::idcode::DEVICES
                .iter()
                .flat_map(|d| d.names.iter().copied())
                .collect();
            SimError::Config(format!(
                "--part {:?}: not a part whose IDCODE the simulator knows ({})",
                self.part,
                known.join(", ")
            ))
        })
    }

    /// `(major, minor)` of `--shell-version`.
    pub fn version(&self) -> (u16, u16) {
        let mut parts = self.shell_version.split('.');
        let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(1);
        let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (major, minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_interface_id_is_the_shells() {
        let c = SimConfig::parse_from(["fabric-sim", "--root", "."]);
        assert_eq!(c.interface_id, fabric_hw::contract::SHELL_INTERFACE_ID);
    }

    #[test]
    fn the_clock_is_the_boards_unless_given() {
        let mut c = SimConfig::for_root("/nonexistent");
        assert_eq!(c.clock_hz(), 200_000_000, "the K26's");
        c.part = "xc7z020clg484-1".into();
        assert_eq!(c.clock_hz(), 100_000_000, "the ZedBoard's");
        c.clock_mhz = Some(150);
        assert_eq!(c.clock_hz(), 150_000_000);
    }

    #[test]
    fn fixed_times_are_asked_for_or_not() {
        let mut c = SimConfig::parse_from(["fabric-sim", "--root", "."]);
        assert_eq!(c.fixed_times(), None, "each engine its own");
        c.decode_us = Some(1000);
        c.time_scale = 2.0;
        assert_eq!(
            c.fixed_times(),
            Some((Duration::from_micros(100), Duration::from_millis(2)))
        );
    }
}
