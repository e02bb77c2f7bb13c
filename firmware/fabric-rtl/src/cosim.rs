//! The Verilated fabric behind its C interface (`rtl/sim/cosim.cpp`).

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

/// The opaque handle of `cosim.cpp`.
#[repr(C)]
struct Fcs {
    _private: [u8; 0],
}

type MemFn = extern "C" fn(ctx: *mut c_void, addr: u64, word: *mut u32, write: c_int) -> c_int;

extern "C" {
    fn fcs_new(read_latency: u32) -> *mut Fcs;
    fn fcs_free(f: *mut Fcs);
    fn fcs_set_mem(f: *mut Fcs, mem: Option<MemFn>, ctx: *mut c_void);
    fn fcs_reset(f: *mut Fcs);
    fn fcs_run(f: *mut Fcs, cycles: u64);
    fn fcs_cycles(f: *const Fcs) -> u64;
    fn fcs_irq(f: *const Fcs) -> c_int;
    fn fcs_decoupled(f: *const Fcs, slot: u32) -> c_int;
    fn fcs_pr_active(f: *mut Fcs, slot: u32, on: c_int);
    fn fcs_greybox(f: *mut Fcs, slot: u32, on: c_int);
    fn fcs_lm_module(f: *mut Fcs, slot: u32, on: c_int);
    fn fcs_write(f: *mut Fcs, port: u32, addr: u32, value: u32) -> u32;
    fn fcs_read(f: *mut Fcs, port: u32, addr: u32) -> u32;
    fn fcs_set_ports(f: *mut Fcs, latency: u32, depth: u32, stall_permille: u32, seed: u64);
    fn fcs_port_beats(f: *const Fcs, slot: u32) -> u64;
    fn fcs_trace_path(f: *const Fcs) -> *const std::ffi::c_char;
    fn fcs_grant(f: *mut Fcs, slot: u32, n: i64);
    fn fcs_credits(f: *const Fcs, slot: u32) -> i64;
}

/// What the fabric's AXI4 master reaches: the board's DDR, by physical
/// address, a 32-bit word at a time. `None` or `false` answers the access
/// with a decode error, as the interconnect does for an address no slave
/// holds.
pub trait Memory {
    fn read(&mut self, addr: u64) -> Option<u32>;
    fn write(&mut self, addr: u64, word: u32) -> bool;
}

/// DDR as a plain buffer at a physical base address.
#[derive(Debug, Clone)]
pub struct VecMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl VecMemory {
    /// `len` zeroed bytes at `base`.
    pub fn new(base: u64, len: usize) -> VecMemory {
        VecMemory {
            base,
            bytes: vec![0; len],
        }
    }

    fn at(&self, addr: u64) -> Option<usize> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        (off.checked_add(4)? <= self.bytes.len() && off % 4 == 0).then_some(off)
    }
}

impl Memory for VecMemory {
    fn read(&mut self, addr: u64) -> Option<u32> {
        let off = self.at(addr)?;
        let b = &self.bytes[off..off + 4];
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn write(&mut self, addr: u64, word: u32) -> bool {
        match self.at(addr) {
            Some(off) => {
                self.bytes[off..off + 4].copy_from_slice(&word.to_le_bytes());
                true
            }
            None => false,
        }
    }
}

/// The register windows the fabric answers on: the shell's, and each
/// slot's decoupler's (as Linux's `xlnx,pr-decoupler` maps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    Shell,
    Decoupler(u8),
}

impl Port {
    fn index(self) -> u32 {
        match self {
            Port::Shell => 0,
            Port::Decoupler(s) => 1 + u32::from(s),
        }
    }
}

/// Slots `rtl/sim/fabric_cosim.v` is built with.
pub const SLOTS: u8 = 2;
/// The clock the co-simulated shell reports its times at, in MHz (the
/// K26's; `fabric_us` counts cycles at it).
pub const CLOCK_MHZ: u32 = 200;

/// Why a slot could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum CosimError {
    #[error("slot {slot}: the fabric has {SLOTS} slots")]
    NoSuchSlot { slot: u8 },
}

/// How the engines' HP ports answer their reads (and, with stalls, how the
/// shell's port answers too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Cycles from a burst's AR to its first beat.
    pub latency: u32,
    /// Bursts a port keeps outstanding.
    pub depth: u32,
    /// Per mille of cycles ARREADY is low, and of beats held back a cycle;
    /// with any, each burst's latency is up to half as long again, and the
    /// shell's own port stalls every channel (AR, R, AW, W, B) the same way.
    pub stall_permille: u32,
    /// The stalls' generator's seed: a run repeats with it.
    pub seed: u64,
}

/// One Verilated fabric. It powers on with no module in any slot.
#[derive(Debug)]
pub struct Cosim {
    raw: NonNull<Fcs>,
}

// SAFETY: a Verilated model keeps no thread-local state between calls (it
// is built without --threads), so it may move to another thread between
// them; `Cosim` is not `Sync`, and every call goes through `&mut self` or
// `&self` of a value that is not shared without a lock.
unsafe impl Send for Cosim {}

extern "C" fn memory_access(ctx: *mut c_void, addr: u64, word: *mut u32, write: c_int) -> c_int {
    // SAFETY: `ctx` is the `&mut &mut dyn Memory` that `with_memory` set for
    // the duration of the one call into the model that invokes us; nothing
    // else touches it meanwhile, and `word` points at a live u32 of
    // cosim.cpp's stack.
    let (mem, word) = unsafe { (&mut *(ctx as *mut &mut dyn Memory), &mut *word) };
    if write != 0 {
        c_int::from(!mem.write(addr, *word))
    } else {
        match mem.read(addr) {
            Some(v) => {
                *word = v;
                0
            }
            None => 1,
        }
    }
}

impl Cosim {
    /// A fabric out of reset, whose DDR answers reads after `read_latency`
    /// cycles.
    pub fn new(read_latency: u32) -> Cosim {
        // SAFETY: fcs_new returns a fresh handle or aborts (C++ new).
        let raw = unsafe { fcs_new(read_latency) };
        Cosim {
            raw: NonNull::new(raw).expect("cosim.cpp allocates its handle"),
        }
    }

    fn with_memory<T>(&mut self, mem: &mut dyn Memory, f: impl FnOnce(*mut Fcs) -> T) -> T {
        let mut mem: &mut dyn Memory = mem;
        let ctx = &mut mem as *mut &mut dyn Memory as *mut c_void;
        // SAFETY: the handle is live; `ctx` outlives the call below, and is
        // cleared before this returns, so the model never calls back with a
        // dangling pointer.
        unsafe { fcs_set_mem(self.raw.as_ptr(), Some(memory_access), ctx) };
        let out = f(self.raw.as_ptr());
        // SAFETY: as above.
        unsafe { fcs_set_mem(self.raw.as_ptr(), None, std::ptr::null_mut()) };
        out
    }

    /// Reads a register: one AXI4-Lite read on `port`.
    pub fn read(&mut self, mem: &mut dyn Memory, port: Port, offset: u32) -> u32 {
        // SAFETY: a live handle; the memory callback is set for the call.
        self.with_memory(mem, |f| unsafe { fcs_read(f, port.index(), offset) })
    }

    /// Writes a register: one AXI4-Lite write on `port`.
    pub fn write(&mut self, mem: &mut dyn Memory, port: Port, offset: u32, value: u32) {
        // SAFETY: as in `read`.
        self.with_memory(mem, |f| unsafe {
            fcs_write(f, port.index(), offset, value)
        });
    }

    /// Runs the clock for `cycles`.
    pub fn run(&mut self, mem: &mut dyn Memory, cycles: u64) {
        // SAFETY: as in `read`.
        self.with_memory(mem, |f| unsafe { fcs_run(f, cycles) });
    }

    /// Resets every register, as the end of a full reconfiguration does.
    pub fn reset(&mut self, mem: &mut dyn Memory) {
        // SAFETY: as in `read`.
        self.with_memory(mem, |f| unsafe { fcs_reset(f) });
    }

    /// Clock cycles since power-on.
    pub fn cycles(&self) -> u64 {
        // SAFETY: a live handle, read only.
        unsafe { fcs_cycles(self.raw.as_ptr()) }
    }

    /// The interrupt line.
    pub fn irq(&self) -> bool {
        // SAFETY: a live handle, read only.
        unsafe { fcs_irq(self.raw.as_ptr()) != 0 }
    }

    /// Whether slot `slot`'s decoupler holds it apart from the shell.
    pub fn decoupled(&self, slot: u8) -> bool {
        // SAFETY: a live handle, read only.
        slot < SLOTS && unsafe { fcs_decoupled(self.raw.as_ptr(), u32::from(slot)) != 0 }
    }

    /// Marks slot `slot`'s logic as being reprogrammed (its outputs are
    /// garbage) or done.
    pub fn set_programming(&mut self, slot: u8, on: bool) -> Result<(), CosimError> {
        if slot >= SLOTS {
            return Err(CosimError::NoSuchSlot { slot });
        }
        // SAFETY: a live handle.
        unsafe { fcs_pr_active(self.raw.as_ptr(), u32::from(slot), c_int::from(on)) };
        Ok(())
    }

    /// Paces slot `slot`'s engine: `Some(n)` lets it take `n` more steps
    /// than it may already; `None` lifts the limit (the default).
    pub fn grant(&mut self, slot: u8, steps: Option<u64>) {
        let n = steps.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        // SAFETY: a live handle; out-of-range slots are ignored by the callee.
        unsafe { fcs_grant(self.raw.as_ptr(), u32::from(slot), n) };
    }

    /// The steps slot `slot` may still take; `None`: no limit.
    pub fn credits(&self, slot: u8) -> Option<u64> {
        // SAFETY: a live handle; out-of-range slots read 0.
        let n = unsafe { fcs_credits(self.raw.as_ptr(), u32::from(slot)) };
        u64::try_from(n).ok()
    }

    /// Empties slot `slot` (`true`: a greybox, no module; its outputs tied
    /// to 0 as Vivado ties them) or configures the engine in it again (a
    /// partial load's end: the engine comes out of reset with no table).
    pub fn set_greybox(&mut self, slot: u8, on: bool) -> Result<(), CosimError> {
        if slot >= SLOTS {
            return Err(CosimError::NoSuchSlot { slot });
        }
        // SAFETY: a live handle.
        unsafe { fcs_greybox(self.raw.as_ptr(), u32::from(slot), c_int::from(on)) };
        Ok(())
    }

    /// Which module slot `slot` holds once configured: the transformer's
    /// (`true`, `rtl/slot/fabric_slot_lm.v`) or the trigram engine's
    /// (`rtl/slot/fabric_slot.v`). Set while the slot is being programmed,
    /// as a partial bitstream of either would configure it.
    pub fn set_transformer(&mut self, slot: u8, on: bool) -> Result<(), CosimError> {
        if slot >= SLOTS {
            return Err(CosimError::NoSuchSlot { slot });
        }
        // SAFETY: a live handle.
        unsafe { fcs_lm_module(self.raw.as_ptr(), u32::from(slot), c_int::from(on)) };
        Ok(())
    }

    /// The 64-bit beats slot `slot`'s engine has read from DDR since power
    /// on: its table traffic.
    pub fn engine_beats(&self, slot: u8) -> u64 {
        // SAFETY: a live handle, read only; out-of-range slots read 0.
        unsafe { fcs_port_beats(self.raw.as_ptr(), u32::from(slot)) }
    }

    /// Sets how the engines' ports answer (by default: after the read
    /// latency `new` was given, four bursts outstanding, no stalls).
    pub fn set_ports(&mut self, ports: Ports) {
        // SAFETY: a live handle.
        unsafe {
            fcs_set_ports(
                self.raw.as_ptr(),
                ports.latency,
                ports.depth,
                ports.stall_permille,
                ports.seed,
            )
        };
    }
}

impl Cosim {
    /// The waveform this fabric writes: with `FABRIC_RTL_TRACE=DIR` set
    /// when the model was built and now, `DIR/cosim-PID-N.vcd`; else `None`.
    pub fn trace_path(&self) -> Option<std::path::PathBuf> {
        // SAFETY: a live handle; the string lives as long as the handle,
        // and is copied before this returns.
        let path = unsafe { std::ffi::CStr::from_ptr(fcs_trace_path(self.raw.as_ptr())) };
        let path = path.to_string_lossy();
        (!path.is_empty()).then(|| std::path::PathBuf::from(path.as_ref()))
    }
}

impl Drop for Cosim {
    fn drop(&mut self) {
        let trace = self.trace_path();
        // SAFETY: the handle is live and dropped once.
        unsafe { fcs_free(self.raw.as_ptr()) }
        // A test that passed leaves no waveform; a failing one (this thread
        // panicking) keeps it, and says where.
        if let Some(path) = trace {
            if std::thread::panicking() {
                eprintln!(
                    "fabric-rtl: the waveform of this fabric is {}",
                    path.display()
                );
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}
