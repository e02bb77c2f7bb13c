//! The interrupt line as UIO has it: a count, a mask, and the unmasks the
//! daemon writes.

use std::fs::File;
use std::time::{Duration, Instant};

/// The interrupt line as UIO sees it.
#[derive(Debug, Default)]
pub struct IrqLine {
    pub count: u32,
    pub masked: bool,
    pub conns: Vec<File>,
    /// When the socket was last read.
    looked: Option<Instant>,
}

/// How often unmasks are read while the line is unmasked. To UIO such a
/// write is a no-op that never fails, and the daemon's watchdog makes one
/// every drain (driver.rs, `WATCHDOG`); unread, they would fill the
/// socket (a few hundred messages of the writer's send buffer) and the
/// daemon's `write` would fail with `EAGAIN`, which silicon never does.
/// Read this often, a writer would need some hundred thousand writes a
/// second to fill it.
const UNMASKED_LOOK: Duration = Duration::from_millis(2);

impl IrqLine {
    /// Takes the unmask writes that came since the last look, without
    /// waiting. Nothing sleeps on the socket: a thread blocked in `read`
    /// would be woken by every unmask, and that wake-up is done in, and
    /// charged to, the daemon's `write` (docs/design.md, "The simulator"),
    /// which on silicon is a register write in the kernel's UIO handler.
    /// While the line is masked the sequencer looks at every tick, so an
    /// unmask takes effect within a poll interval, as a doorbell does;
    /// while it is unmasked, only every [`UNMASKED_LOOK`], so the no-op
    /// unmasks cost a few system calls a second and an idle fabric
    /// (whose ticks back off) hardly any.
    pub fn take_unmasks(&mut self, now: Instant) {
        let due = self
            .looked
            .is_none_or(|at| now.saturating_duration_since(at) >= UNMASKED_LOOK);
        if self.masked || due {
            self.looked = Some(now);
            self.read();
        }
    }

    /// Masks the line, as the kernel's handler does when it fires. Unmasks
    /// written while the line was unmasked are discarded first: to UIO they
    /// were no-ops.
    pub fn mask(&mut self) {
        self.read();
        self.masked = true;
    }

    /// Reads what the daemon wrote: an unmask unmasks; a closed connection
    /// is dropped.
    fn read(&mut self) {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 4];
        self.conns.retain(|conn| loop {
            match recv(conn.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                Ok(4) => {
                    if i32::from_ne_bytes(buf) == 1 {
                        self.masked = false;
                    }
                }
                Ok(0) => {
                    log::info!("fabric-sim: daemon detached from the interrupt");
                    return false;
                }
                Ok(n) => log::warn!("irq socket: {n}-byte write ignored (UIO takes exactly 4)"),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return true,
                Err(e) => {
                    log::warn!("irq socket: {e}; dropping the connection");
                    return false;
                }
            }
        });
    }
}
