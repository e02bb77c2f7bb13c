//! The hardware layer of fabricd: everything that touches a kernel interface
//! of the board, and the fabric contract itself.
//!
//! This crate holds the `unsafe` code that reaches the board; the only other
//! `unsafe` in the workspace is fabricd's two calls into glibc's allocator
//! and fabric-rtl's FFI to the Verilated RTL (docs/design.md, "Where the
//! `unsafe` is"). Every `unsafe` block carries a `SAFETY:` comment; the
//! blocks live in [`mmio`] (volatile register access), [`dma`] (copies into
//! the shared DDR mapping), [`barrier`] (the two memory barriers of the
//! doorbell protocol) and [`uio`] (the interrupt's descriptor handed to
//! tokio).
//!
//! # Layout
//! - [`contract`]: the register map, descriptor formats and CRCs of
//!   `docs/fabric-contract.md`, as types.
//! - [`root`]: every path (sysfs, `/dev`, configfs, firmware) hangs off one
//!   configurable root, `/` on a board and a temporary directory in tests.
//! - [`sysfs`]: reading and writing attribute files with typed errors.
//! - [`mmio`]: an owned mapping of a register window, aligned 32-bit volatile
//!   access only, behind the [`mmio::RegisterWindow`] trait.
//! - [`uio`]: finding a UIO device by name, mapping its maps, and waiting for
//!   its interrupt with tokio's `AsyncFd`.
//! - [`dma`]: a u-dma-buf buffer: physical address, mapping, cache maintenance.
//! - [`devtree`]: the live device tree (`/proc/device-tree`) and `.dtb`/`.dtbo`
//!   blobs, and discovery of the shell, its PR slots and its buffer.
//! - [`bitstream`]: Xilinx `.bit` headers and the byte-swapped `.bin` form.
//! - [`fpga`]: the FPGA manager and configfs device-tree overlays.
//! - [`shell`]: the driver of the static shell: attach, slots, counters.
//! - [`rings`]: the rings in the DDR buffer: the doorbell, completions.
//! - [`tables`]: the slots' model tables in the DDR buffer, and the commit
//!   that has a slot's engine read one in.
//! - [`sampling`]: the integer arithmetic every decoder samples with.
//! - [`attach`](mod@attach): the one assembly of these parts that every driver of the
//!   fabric uses (the daemon, `fabricd generate`, the simulator's tests).
//! - [`report`]: an error with its causes on one line, each once, for
//!   logs and refusals.
//!
//! # Why not the `uio` crate
//! The `uio` crate hard-codes `/dev` and `/sys` (so tests cannot point it at a
//! fake tree), assumes a 4 KiB page, and hands out raw pointers with no unmap.
//! [`uio`] here is about as long, takes its paths from [`root::Root`], asks the
//! kernel for the page size, and owns its mappings.

pub mod attach;
pub mod barrier;
pub mod bitstream;
pub mod contract;
pub mod devtree;
pub mod dma;
pub mod fpga;
pub mod mmio;
pub mod report;
pub mod rings;
pub mod root;
pub mod sampling;
pub mod shell;
pub mod sysfs;
pub mod tables;
pub mod uio;

pub use attach::{attach, AttachError, Attached};
pub use report::Chain;
pub use root::Root;
