//! The Verilated fabric as a register window: what the driver's code runs
//! on in process.

use std::sync::{Mutex, MutexGuard, PoisonError};

use fabric_hw::contract::WINDOW_LEN;
use fabric_hw::mmio::RegisterWindow;

use crate::cosim::{Cosim, Memory, Port};

/// The fabric and the memory its master reaches, behind one lock.
#[derive(Debug)]
pub struct Board<M> {
    pub fabric: Cosim,
    pub memory: M,
}

/// A register window whose every access is an AXI4-Lite transaction on
/// the Verilated shell. The clock runs only inside accesses and [`run`]
/// calls: the RTL is frozen while the host is not looking, so a test's
/// pace, not the machine's, decides how far the fabric gets.
///
/// [`run`]: RtlWindow::run
#[derive(Debug)]
pub struct RtlWindow<M> {
    board: Mutex<Board<M>>,
}

impl<M: Memory> RtlWindow<M> {
    /// A window on `fabric`, whose master reaches `memory`.
    pub fn new(fabric: Cosim, memory: M) -> Self {
        RtlWindow {
            board: Mutex::new(Board { fabric, memory }),
        }
    }

    /// The fabric and its memory.
    pub fn lock(&self) -> MutexGuard<'_, Board<M>> {
        self.board.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs the clock for `cycles`.
    pub fn run(&self, cycles: u64) {
        let mut b = self.lock();
        let Board { fabric, memory } = &mut *b;
        fabric.run(memory, cycles);
    }
}

impl<M: Memory + Send> RegisterWindow for RtlWindow<M> {
    fn read32(&self, offset: usize) -> u32 {
        assert!(offset.is_multiple_of(4) && offset < WINDOW_LEN);
        let mut b = self.lock();
        let Board { fabric, memory } = &mut *b;
        fabric.read(memory, Port::Shell, offset as u32)
    }

    fn write32(&self, offset: usize, value: u32) {
        assert!(offset.is_multiple_of(4) && offset < WINDOW_LEN);
        let mut b = self.lock();
        let Board { fabric, memory } = &mut *b;
        fabric.write(memory, Port::Shell, offset as u32, value);
    }

    fn len(&self) -> usize {
        WINDOW_LEN
    }
}
