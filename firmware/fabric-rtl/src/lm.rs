//! The transformer engine (`rtl/engine/lm/fabric_lm.v`) Verilated alone,
//! behind its C interface (`rtl/sim/lm.cpp`): its HP port answered from a
//! memory of its own, its step and answer channels driven a step at a
//! time. The tests check it against `fabric_model::lm` token for token;
//! the shell drives the same channels on a board.

use std::ffi::c_int;
use std::ops::Range;
use std::ptr::NonNull;

#[repr(C)]
struct Flm {
    _private: [u8; 0],
}

extern "C" {
    fn flm_new(base: u64, len: u64, latency: u32, stall_permille: u32, seed: u64) -> *mut Flm;
    fn flm_free(f: *mut Flm);
    fn flm_mem_write(f: *mut Flm, addr: u64, bytes: *const u8, len: u64) -> c_int;
    fn flm_mem_read(f: *mut Flm, addr: u64, bytes: *mut u8, len: u64) -> c_int;
    fn flm_fail_range(f: *mut Flm, lo: u64, hi: u64);
    fn flm_commit(
        f: *mut Flm,
        base: u64,
        region: u32,
        max_cycles: u64,
        crc: *mut u32,
        identity: *mut u8,
    ) -> c_int;
    #[allow(clippy::too_many_arguments)]
    fn flm_request(
        f: *mut Flm,
        lane: u32,
        first: c_int,
        prompt: u64,
        len: u32,
        draw: u32,
        greedy: c_int,
        inv_t: u32,
        max_cycles: u64,
    ) -> c_int;
    fn flm_response(
        f: *mut Flm,
        max_cycles: u64,
        lane: *mut u32,
        token: *mut u32,
        fault: *mut u32,
    ) -> c_int;
    fn flm_cycles(f: *const Flm) -> u64;
    fn flm_read_beats(f: *const Flm) -> u64;
    fn flm_writes(f: *const Flm) -> u64;
}

/// Contexts the engine serves in a round (the RTL's `LANES`).
pub const LANES: u32 = 8;

/// How the engine's HP port answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LmPort {
    /// Cycles from a burst's address to its first beat, and from a write
    /// to its response.
    pub latency: u32,
    /// Per mille of cycles each ready and valid the port drives drops.
    pub stall_permille: u32,
    /// The stalls' generator's seed.
    pub seed: u64,
}

/// What a commit came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LmCommit {
    Taken {
        crc: u32,
        identity: [u8; 32],
    },
    /// Not weights this engine runs, or a region too small for them and
    /// the lanes' keys and values.
    Refused,
    ReadFailed,
}

/// The engine's answer to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LmFault {
    None,
    NoTable,
    Read,
    /// Every position of the context is taken.
    Full,
    /// A prompt token outside the vocabulary.
    Token,
}

/// One answer: a lane's token, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LmAnswer {
    pub lane: u32,
    pub token: u32,
    pub fault: LmFault,
}

/// A step as the shell hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LmStep {
    pub lane: u32,
    /// A new sequence: end-of-text, then the prompt at `prompt`.
    pub first: bool,
    pub prompt: u64,
    pub len: u32,
    /// The high half of the step's SplitMix64 output.
    pub draw: u32,
    pub greedy: bool,
    pub inv_t: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LmError {
    #[error("{len} bytes at {addr:#x} are outside the engine's memory")]
    Outside { addr: u64, len: usize },
    #[error("{what}: nothing within {cycles} cycles")]
    Timeout { what: &'static str, cycles: u64 },
    #[error("the commit answered result {0}, which the engine does not define")]
    Result(c_int),
    #[error("the step answered fault {0}, which the engine does not define")]
    Fault(u32),
}

/// The Verilated engine and the memory its port reaches.
#[derive(Debug)]
pub struct LmEngine {
    f: NonNull<Flm>,
}

// SAFETY: the handle is owned by this value alone; `lm.cpp` keeps no
// global state, so the model may move between threads with it.
unsafe impl Send for LmEngine {}

impl LmEngine {
    /// The engine out of reset, its port reaching `len` zeroed bytes at
    /// physical address `base`.
    pub fn new(base: u64, len: u64, port: LmPort) -> LmEngine {
        // SAFETY: plain values in; the result is checked for null.
        let f = unsafe { flm_new(base, len, port.latency, port.stall_permille, port.seed) };
        LmEngine {
            f: NonNull::new(f)
                .expect("flm_new allocates with new, which throws rather than return null"),
        }
    }

    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), LmError> {
        // SAFETY: the handle is live; `bytes` is valid for its length.
        let r = unsafe { flm_mem_write(self.f.as_ptr(), addr, bytes.as_ptr(), bytes.len() as u64) };
        if r == 0 {
            Ok(())
        } else {
            Err(LmError::Outside {
                addr,
                len: bytes.len(),
            })
        }
    }

    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, LmError> {
        let mut out = vec![0u8; len];
        // SAFETY: the handle is live; `out` is valid for `len` bytes.
        let r = unsafe { flm_mem_read(self.f.as_ptr(), addr, out.as_mut_ptr(), len as u64) };
        if r == 0 {
            Ok(out)
        } else {
            Err(LmError::Outside { addr, len })
        }
    }

    /// Reads and writes in `range` answer with SLVERR from now on.
    pub fn fail(&mut self, range: Range<u64>) {
        // SAFETY: the handle is live.
        unsafe { flm_fail_range(self.f.as_ptr(), range.start, range.end) }
    }

    /// Commits the weights at `base` in a region of `region` words.
    pub fn commit(&mut self, base: u64, region: u32, max_cycles: u64) -> Result<LmCommit, LmError> {
        let mut crc = 0u32;
        let mut identity = [0u8; 32];
        // SAFETY: the handle is live; the out-pointers are valid (32 bytes
        // for the identity).
        let r = unsafe {
            flm_commit(
                self.f.as_ptr(),
                base,
                region,
                max_cycles,
                &mut crc,
                identity.as_mut_ptr(),
            )
        };
        match r {
            0 => Ok(LmCommit::Taken { crc, identity }),
            1 => Ok(LmCommit::Refused),
            2 => Ok(LmCommit::ReadFailed),
            -1 => Err(LmError::Timeout {
                what: "a commit",
                cycles: max_cycles,
            }),
            other => Err(LmError::Result(other)),
        }
    }

    /// Offers a step until the engine takes it.
    pub fn request(&mut self, s: &LmStep, max_cycles: u64) -> Result<(), LmError> {
        // SAFETY: the handle is live; plain values in.
        let r = unsafe {
            flm_request(
                self.f.as_ptr(),
                s.lane,
                c_int::from(s.first),
                s.prompt,
                s.len,
                s.draw,
                c_int::from(s.greedy),
                s.inv_t,
                max_cycles,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(LmError::Timeout {
                what: "a step offered",
                cycles: max_cycles,
            })
        }
    }

    /// Clocks until the engine answers a step.
    pub fn answer(&mut self, max_cycles: u64) -> Result<LmAnswer, LmError> {
        let (mut lane, mut token, mut fault) = (0u32, 0u32, 0u32);
        // SAFETY: the handle is live; the out-pointers are valid.
        let r = unsafe {
            flm_response(
                self.f.as_ptr(),
                max_cycles,
                &mut lane,
                &mut token,
                &mut fault,
            )
        };
        if r == 0 {
            return Err(LmError::Timeout {
                what: "an answer",
                cycles: max_cycles,
            });
        }
        let fault = match fault {
            0 => LmFault::None,
            1 => LmFault::NoTable,
            2 => LmFault::Read,
            3 => LmFault::Full,
            4 => LmFault::Token,
            other => return Err(LmError::Fault(other)),
        };
        Ok(LmAnswer { lane, token, fault })
    }

    /// Cycles since power-on.
    pub fn cycles(&self) -> u64 {
        // SAFETY: the handle is live.
        unsafe { flm_cycles(self.f.as_ptr()) }
    }

    /// Beats the port has handed the engine, and writes it has taken.
    pub fn traffic(&self) -> (u64, u64) {
        // SAFETY: the handle is live.
        unsafe { (flm_read_beats(self.f.as_ptr()), flm_writes(self.f.as_ptr())) }
    }
}

impl Drop for LmEngine {
    fn drop(&mut self) {
        // SAFETY: the handle came from flm_new and is freed once, here.
        unsafe { flm_free(self.f.as_ptr()) }
    }
}
