//! The fabric contract (`docs/fabric-contract.md`) as types: the shell's
//! register map here, the descriptor formats and their CRCs in
//! `descriptor.rs` (re-exported here).
//!
//! Registers are typed twice over: by their bitfields (a field of one
//! register cannot be read from another, thanks to `tock-registers`), and by
//! their writer ([`Host`] or [`Device`]). Every word has exactly one writer,
//! so the host side of the code has no way to write a device-owned register,
//! and the simulator's only way to do so is the explicitly named
//! [`Reg::device_write`].

use std::marker::PhantomData;

use tock_registers::fields::FieldValue;
use tock_registers::register_bitfields;
use tock_registers::{LocalRegisterCopy, RegisterLongName};

use crate::mmio::RegisterWindow;

/// `MAGIC` of a fabricd shell: "FABR".
pub const MAGIC: u32 = 0x4641_4252;
/// The major version this crate speaks.
pub const VERSION_MAJOR: u16 = 2;
/// The minor version this crate implements (newer minors are accepted).
pub const VERSION_MINOR: u16 = 0;
/// Bytes of register window the contract needs (through the last `CTX_CANCEL`).
pub const WINDOW_LEN: usize = 0x800;
/// Most PR slots a shell can have.
pub const MAX_SLOTS: usize = 8;
/// Most decode lanes (requests computed at once) per slot.
pub const MAX_LANES: usize = 32;
/// Most contexts (requests held: decoding, or accepted and waiting for a
/// lane) per slot.
pub const MAX_CONTEXTS: usize = 32;
/// Most contexts of a whole shell: the bound of the host's per-context
/// state, which is therefore fixed in size.
pub const MAX_SHELL_CONTEXTS: usize = MAX_SLOTS * MAX_CONTEXTS;
/// Size of a submission descriptor.
pub const SQE_LEN: usize = 64;
/// Size of a completion entry.
pub const CQE_LEN: usize = 32;
/// `SLOT_SHUTDOWN` once a quiesced slot has nothing outstanding, in the
/// encoding of Xilinx's DFX AXI Shutdown Manager: requested [0], both
/// channels shut down [1], write channel [2], read channel [3].
pub const SHUTDOWN_DONE: u32 = 0x0F;
/// `SLOT_SHUTDOWN` while a quiesced slot still has a step outstanding:
/// requested, the write channel shut down, the read channel not yet.
pub const SHUTDOWN_DRAINING: u32 = 0x05;
/// `SLOT_STATE.ERROR` codes (contract 2.0, section 7). What the shell
/// cannot see (an image not found, programming that failed) the kernel
/// reports: codes 1 and 3 of contract 1.1 are gone.
pub mod slot_error {
    /// The committed table is not one the slot's engine runs: its magic,
    /// its engine, or its size against the region it was given.
    pub const BAD_TABLE: u8 = 2;
    /// The slot was reprogrammed with a step or a table read outstanding,
    /// or answered a step nobody asked for (reprogrammed while coupled):
    /// what it holds cannot be trusted until it is loaded again.
    pub const TORN: u8 = 4;
    /// A step was never answered.
    pub const HUNG: u8 = 5;
    /// A read of the table failed: answered with a bus error (DECERR or
    /// SLVERR), or it would have passed the end of the table's region.
    pub const TABLE_READ: u8 = 6;
}

/// An engine, as a slot's module reports it in `SLOT_ENGINE` and a model
/// names the engine it runs on (contract section 9): a kind and the
/// version of the table format it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct EngineId {
    pub kind: u16,
    pub version: u16,
}

impl EngineId {
    /// The word-trigram engine with back-off that reads its table from DDR
    /// (table format FTB2).
    pub const TRIGRAM_V2: EngineId = EngineId {
        kind: 1,
        version: 2,
    };

    /// The int8 transformer that streams its weights from DDR (weights
    /// format FLM1, contract section 10).
    pub const TRANSFORMER_V1: EngineId = EngineId {
        kind: 2,
        version: 1,
    };

    /// Decodes `SLOT_ENGINE`; `None` for 0: no module in the slot.
    pub fn decode(value: u32) -> Option<EngineId> {
        (value != 0).then_some(EngineId {
            kind: value as u16,
            version: (value >> 16) as u16,
        })
    }

    /// `SLOT_ENGINE` as the module drives it.
    pub fn encode(self) -> u32 {
        u32::from(self.kind) | (u32::from(self.version) << 16)
    }

    /// The kind's name (`trigram`), or its number.
    pub fn kind_name(self) -> String {
        match self.kind {
            1 => "trigram".into(),
            2 => "transformer".into(),
            k => format!("kind-{k}"),
        }
    }
}

impl std::fmt::Display for EngineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} v{}", self.kind_name(), self.version)
    }
}
/// `stop_token` meaning "no stop token".
pub const NO_STOP_TOKEN: u32 = u32::MAX;
/// The device compatible string of the shell node.
pub const SHELL_COMPATIBLE: &str = "fabricd,shell-1.0";
/// The UIO name of the shell.
pub const SHELL_UIO_NAME: &str = "fabric-shell";

register_bitfields![u32,
    pub VERSION [
        MINOR OFFSET(0) NUMBITS(16) [],
        MAJOR OFFSET(16) NUMBITS(16) []
    ],
    pub CAPS [
        SLOTS OFFSET(0) NUMBITS(4) [],
        LANES OFFSET(4) NUMBITS(8) [],
        CONTEXTS OFFSET(12) NUMBITS(8) []
    ],
    pub CONTROL [
        ENABLE OFFSET(0) NUMBITS(1) [],
        IRQ_ENABLE OFFSET(1) NUMBITS(1) []
    ],
    pub STATUS [
        RUNNING OFFSET(0) NUMBITS(1) [],
        FAULT OFFSET(2) NUMBITS(1) []
    ],
    pub SLOT_STATE [
        STATE OFFSET(0) NUMBITS(4) [
            Empty = 0,
            Loading = 1,
            Ready = 2,
            Error = 3,
            NoModel = 4
        ],
        ERROR OFFSET(8) NUMBITS(8) []
    ],
    pub SLOT_CTRL [
        QUIESCE OFFSET(0) NUMBITS(1) []
    ]
];

/// Marker: the host (the daemon) writes this register.
#[derive(Debug, Clone, Copy)]
pub enum Host {}
/// Marker: the device (the fabric, or the simulator) writes this register.
#[derive(Debug, Clone, Copy)]
pub enum Device {}

/// A 32-bit register at a fixed offset, with its bitfields `R` and its
/// writer `W`.
pub struct Reg<R: RegisterLongName, W> {
    offset: usize,
    name: &'static str,
    _marker: PhantomData<(R, W)>,
}

impl<R: RegisterLongName, W> std::fmt::Debug for Reg<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:#05x}", self.name, self.offset)
    }
}

impl<R: RegisterLongName, W> Clone for Reg<R, W> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: RegisterLongName, W> Copy for Reg<R, W> {}

impl<R: RegisterLongName, W> Reg<R, W> {
    const fn at(offset: usize, name: &'static str) -> Self {
        Reg {
            offset,
            name,
            _marker: PhantomData,
        }
    }

    /// Byte offset in the window.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The register's name in the contract, for error messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The raw value.
    pub fn get(&self, window: &dyn RegisterWindow) -> u32 {
        window.read32(self.offset)
    }

    /// The value, decoded by its bitfields.
    pub fn read(&self, window: &dyn RegisterWindow) -> LocalRegisterCopy<u32, R> {
        LocalRegisterCopy::new(self.get(window))
    }
}

impl<R: RegisterLongName> Reg<R, Host> {
    /// Writes a raw value.
    pub fn set(&self, window: &dyn RegisterWindow, value: u32) {
        window.write32(self.offset, value)
    }

    /// Writes a value built from fields.
    pub fn write(&self, window: &dyn RegisterWindow, value: FieldValue<u32, R>) {
        window.write32(self.offset, value.value)
    }
}

impl<R: RegisterLongName> Reg<R, Device> {
    /// Writes a device-owned register. Only the fabric side (the simulator)
    /// calls this.
    pub fn device_write(&self, window: &dyn RegisterWindow, value: u32) {
        window.write32(self.offset, value)
    }
}

/// The INTERFACE_ID of the shell `rtl/` builds (`fabric_regs.v`'s
/// parameter): the slot boundary a partial image is built against, which a
/// partial image's `UserID` must name (section 3 of the contract). The
/// daemon never assumes it: it reads the shell's register and the device
/// tree. The simulator and `mkengine` take it as their default.
pub const SHELL_INTERFACE_ID: u32 = 0x5EED_0002;

type DevU32 = Reg<(), Device>;
type HostU32 = Reg<(), Host>;

pub const REG_MAGIC: DevU32 = Reg::at(0x000, "MAGIC");
pub const REG_VERSION: Reg<VERSION::Register, Device> = Reg::at(0x004, "VERSION");
pub const REG_CAPS: Reg<CAPS::Register, Device> = Reg::at(0x008, "CAPS");
pub const REG_MAX_PROMPT: DevU32 = Reg::at(0x00C, "MAX_PROMPT");
pub const REG_MAX_OUTPUT: DevU32 = Reg::at(0x010, "MAX_OUTPUT");
pub const REG_INTERFACE_ID: DevU32 = Reg::at(0x014, "INTERFACE_ID");
pub const REG_PREFILL_NS: DevU32 = Reg::at(0x018, "PREFILL_NS");
pub const REG_DECODE_NS: DevU32 = Reg::at(0x01C, "DECODE_NS");
pub const REG_CONTROL: Reg<CONTROL::Register, Host> = Reg::at(0x020, "CONTROL");
pub const REG_STATUS: Reg<STATUS::Register, Device> = Reg::at(0x024, "STATUS");
pub const REG_SQ_BASE_LO: HostU32 = Reg::at(0x028, "SQ_BASE_LO");
pub const REG_SQ_BASE_HI: HostU32 = Reg::at(0x02C, "SQ_BASE_HI");
pub const REG_SQ_ENTRIES: HostU32 = Reg::at(0x030, "SQ_ENTRIES");
pub const REG_CQ_BASE_LO: HostU32 = Reg::at(0x034, "CQ_BASE_LO");
pub const REG_CQ_BASE_HI: HostU32 = Reg::at(0x038, "CQ_BASE_HI");
pub const REG_CQ_ENTRIES: HostU32 = Reg::at(0x03C, "CQ_ENTRIES");
pub const REG_SQ_TAIL: HostU32 = Reg::at(0x040, "SQ_TAIL");
pub const REG_SQ_HEAD: DevU32 = Reg::at(0x044, "SQ_HEAD");
pub const REG_CQ_HEAD: HostU32 = Reg::at(0x048, "CQ_HEAD");
pub const REG_CQ_TAIL: DevU32 = Reg::at(0x04C, "CQ_TAIL");
pub const REG_EVENT_SEQ: DevU32 = Reg::at(0x050, "EVENT_SEQ");
pub const REG_EVENT_ACK: HostU32 = Reg::at(0x054, "EVENT_ACK");
pub const REG_FAULT_CODE: DevU32 = Reg::at(0x058, "FAULT_CODE");
pub const REG_CNT_SUBMITTED: DevU32 = Reg::at(0x060, "CNT_SUBMITTED");
pub const REG_CNT_COMPLETED: DevU32 = Reg::at(0x064, "CNT_COMPLETED");
pub const REG_CNT_CANCELLED: DevU32 = Reg::at(0x068, "CNT_CANCELLED");
pub const REG_CNT_ACTIVE: DevU32 = Reg::at(0x06C, "CNT_ACTIVE");
pub const REG_CNT_TOKENS: DevU32 = Reg::at(0x070, "CNT_TOKENS");
pub const REG_CNT_ERRORS: DevU32 = Reg::at(0x074, "CNT_ERRORS");

const SLOT_BASE: usize = 0x100;
const SLOT_STRIDE: usize = 0x40;
const TABLE_BASE: usize = 0x300;
const TABLE_STRIDE: usize = 0x10;
const CANCEL_BASE: usize = 0x400;

/// The registers of PR slot `s`.
#[derive(Debug, Clone, Copy)]
pub struct SlotRegs {
    pub state: Reg<SLOT_STATE::Register, Device>,
    /// The engine the slot's module reports (`EngineId`); 0: no module.
    pub engine: DevU32,
    pub ctrl: Reg<SLOT_CTRL::Register, Host>,
    pub shutdown: DevU32,
    pub active: DevU32,
    /// Table commits the slot acted on since power-on, whatever the table
    /// turned out to be: a refused commit leaves it as it was.
    pub loads: DevU32,
    /// The CRC-32 the engine computed over the committed table as it read
    /// it in.
    pub table_crc: DevU32,
    /// The last `TABLE_COMMIT` the slot has acted on.
    pub committed: DevU32,
    /// Where the slot's table lies in DDR (physical), and how many words
    /// its region holds (section 7, "Committing a table").
    pub table_base_lo: HostU32,
    pub table_base_hi: HostU32,
    pub table_words: HostU32,
    /// Written with a value other than `committed`: read the table in.
    pub table_commit: HostU32,
    identity_base: usize,
}

impl SlotRegs {
    /// The register blocks of slot `slot` (`slot < MAX_SLOTS`).
    pub fn of(slot: usize) -> SlotRegs {
        assert!(
            slot < MAX_SLOTS,
            "slot {slot} beyond the contract's {MAX_SLOTS}"
        );
        let base = SLOT_BASE + SLOT_STRIDE * slot;
        let table = TABLE_BASE + TABLE_STRIDE * slot;
        SlotRegs {
            state: Reg::at(base, "SLOT_STATE"),
            engine: Reg::at(base + 0x04, "SLOT_ENGINE"),
            ctrl: Reg::at(base + 0x08, "SLOT_CTRL"),
            shutdown: Reg::at(base + 0x0C, "SLOT_SHUTDOWN"),
            active: Reg::at(base + 0x10, "SLOT_ACTIVE"),
            loads: Reg::at(base + 0x14, "SLOT_LOADS"),
            table_crc: Reg::at(base + 0x18, "SLOT_TABLE_CRC"),
            committed: Reg::at(base + 0x1C, "SLOT_COMMITTED"),
            identity_base: base + 0x20,
            table_base_lo: Reg::at(table, "TABLE_BASE_LO"),
            table_base_hi: Reg::at(table + 0x04, "TABLE_BASE_HI"),
            table_words: Reg::at(table + 0x08, "TABLE_WORDS"),
            table_commit: Reg::at(table + 0x0C, "TABLE_COMMIT"),
        }
    }

    /// Word `i` (0..8) of `SLOT_IDENTITY`, big-endian words of the
    /// identity the committed table declares.
    pub fn identity_word(&self, i: usize) -> DevU32 {
        assert!(i < 8);
        Reg::at(self.identity_base + 4 * i, "SLOT_IDENTITY")
    }

    /// The 32-byte identity the slot's table declares (its words 8..16):
    /// declared, not computed; the CRC in `table_crc` is what the engine
    /// computed.
    pub fn read_identity(&self, window: &dyn RegisterWindow) -> [u8; 32] {
        let mut id = [0u8; 32];
        for (i, chunk) in id.chunks_exact_mut(4).enumerate() {
            chunk.copy_from_slice(&self.identity_word(i).get(window).to_be_bytes());
        }
        id
    }
}

/// `CTX_CANCEL[ctx]`.
pub fn reg_ctx_cancel(ctx: usize) -> HostU32 {
    assert!(
        ctx < MAX_SLOTS * MAX_LANES,
        "context {ctx} beyond the contract"
    );
    Reg::at(CANCEL_BASE + 4 * ctx, "CTX_CANCEL")
}

/// A slot's state as the shell reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotState {
    /// No module: a greybox.
    #[default]
    Empty,
    /// A load under way: decoupled for a partial reconfiguration (or a
    /// region its overlay left decoupled), or a committed table being read
    /// in.
    Loading,
    Ready,
    Error(u8),
    /// An engine with no model: no table committed since it was loaded.
    NoModel,
    /// A state value this version of the contract does not define.
    Unknown(u8),
}

impl SlotState {
    /// Decodes a `SLOT_STATE` value.
    pub fn decode(value: LocalRegisterCopy<u32, SLOT_STATE::Register>) -> SlotState {
        match value.read_as_enum(SLOT_STATE::STATE) {
            Some(SLOT_STATE::STATE::Value::Empty) => SlotState::Empty,
            Some(SLOT_STATE::STATE::Value::Loading) => SlotState::Loading,
            Some(SLOT_STATE::STATE::Value::Ready) => SlotState::Ready,
            Some(SLOT_STATE::STATE::Value::Error) => {
                SlotState::Error(value.read(SLOT_STATE::ERROR) as u8)
            }
            Some(SLOT_STATE::STATE::Value::NoModel) => SlotState::NoModel,
            None => SlotState::Unknown(value.read(SLOT_STATE::STATE) as u8),
        }
    }

    /// Encodes the state as the device writes it.
    pub fn encode(self) -> u32 {
        match self {
            SlotState::Empty => 0,
            SlotState::Loading => 1,
            SlotState::Ready => 2,
            SlotState::Error(code) => 3 | (u32::from(code) << 8),
            SlotState::NoModel => 4,
            SlotState::Unknown(v) => u32::from(v & 0xF),
        }
    }

    /// The name operators see.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Empty => "empty",
            SlotState::Loading => "loading",
            SlotState::Ready => "ready",
            SlotState::Error(_) => "error",
            SlotState::NoModel => "no_model",
            SlotState::Unknown(_) => "unknown",
        }
    }
}

/// Fault codes in `FAULT_CODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum FaultCode {
    None = 0,
    BadDescriptorCrc = 1,
    StaleDescriptor = 2,
    ContextBusy = 3,
    SlotNotReady = 4,
    RingMisprogrammed = 5,
    DecoderFault = 6,
    /// A `TABLE_COMMIT` the slot could not act on: not quiesced with
    /// nothing outstanding, or no module to read the table.
    CommitRefused = 7,
    /// A read of a slot's table failed (bus error, or past its region).
    TableRead = 8,
}

impl FaultCode {
    /// Decodes a `FAULT_CODE` value.
    pub fn from_u32(value: u32) -> Option<FaultCode> {
        Some(match value {
            0 => FaultCode::None,
            1 => FaultCode::BadDescriptorCrc,
            2 => FaultCode::StaleDescriptor,
            3 => FaultCode::ContextBusy,
            4 => FaultCode::SlotNotReady,
            5 => FaultCode::RingMisprogrammed,
            6 => FaultCode::DecoderFault,
            7 => FaultCode::CommitRefused,
            8 => FaultCode::TableRead,
            _ => return None,
        })
    }
}

mod descriptor;
pub use descriptor::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmio::MemWindow;

    #[test]
    fn typed_registers_decode_their_fields() {
        let w = MemWindow::new(WINDOW_LEN);
        REG_CAPS.device_write(&w, 2 | (4 << 4));
        let caps = REG_CAPS.read(&w);
        assert_eq!(caps.read(CAPS::SLOTS), 2);
        assert_eq!(caps.read(CAPS::LANES), 4);
        REG_CONTROL.write(&w, CONTROL::ENABLE::SET + CONTROL::IRQ_ENABLE::SET);
        assert_eq!(REG_CONTROL.get(&w), 3);
        let slot = SlotRegs::of(1);
        slot.state.device_write(&w, SlotState::Error(7).encode());
        assert_eq!(SlotState::decode(slot.state.read(&w)), SlotState::Error(7));
        assert_eq!(slot.state.offset(), 0x140);
        assert_eq!(reg_ctx_cancel(5).offset(), 0x414);
        for (i, word) in [0x0102_0304u32, 0x0506_0708].iter().enumerate() {
            slot.identity_word(i).device_write(&w, *word);
        }
        assert_eq!(&slot.read_identity(&w)[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(slot.engine.offset(), 0x144);
        assert_eq!(slot.table_commit.offset(), 0x31C);
        slot.engine.device_write(&w, EngineId::TRIGRAM_V2.encode());
        assert_eq!(
            EngineId::decode(slot.engine.get(&w)),
            Some(EngineId::TRIGRAM_V2)
        );
        assert_eq!(EngineId::decode(0), None, "no module");
        slot.state.device_write(&w, SlotState::NoModel.encode());
        assert_eq!(SlotState::decode(slot.state.read(&w)), SlotState::NoModel);
    }

    #[test]
    fn the_last_register_fits_the_window() {
        let last = reg_ctx_cancel(MAX_SLOTS * MAX_CONTEXTS - 1);
        assert!(last.offset() + 4 <= WINDOW_LEN);
        let slot = SlotRegs::of(MAX_SLOTS - 1);
        assert!(slot.identity_word(7).offset() < TABLE_BASE);
        assert!(slot.table_commit.offset() < CANCEL_BASE);
    }
}
