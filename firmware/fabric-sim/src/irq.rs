//! The interrupt seam: a `SOCK_SEQPACKET` socket at `/dev/uio0.irq`.
//!
//! Each message is what a UIO `read()` returns (the s32 event count) or what
//! a UIO `write()` takes (the s32 value 1, unmask). The daemon's
//! `UioIrq` speaks to it with the same code it uses on `/dev/uioN`. This
//! thread only accepts connections; the sequencer writes the counts and
//! takes the unmasks ([`crate::device::IrqLine::take_unmasks`]).

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    accept, bind, listen, shutdown, socket, AddressFamily, Backlog, Shutdown, SockFlag, SockType,
    UnixAddr,
};

use crate::Shared;

pub(crate) fn bind_socket(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    bind(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
    listen(&fd, Backlog::new(16)?)?;
    Ok(fd)
}

pub(crate) fn serve(shared: &Arc<Shared>, listener: OwnedFd) {
    while !shared.stopping() {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u16)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                log::error!("irq socket: poll: {e}");
                return;
            }
        }
        let file = match accept(&listener) {
            Ok(fd) => File::from(fd),
            Err(e) => {
                log::warn!("irq socket: accept: {e}");
                continue;
            }
        };
        {
            let mut f = shared.lock();
            f.irq.conns.push(file);
            // A new reader may be waiting for a level that is already high.
            f.deliver_irq();
        }
        log::info!("fabric-sim: daemon attached to the interrupt");
    }
}

pub(crate) fn close_all(shared: &Shared) {
    let f = shared.lock();
    for conn in &f.irq.conns {
        let _ = shutdown(conn.as_raw_fd(), Shutdown::Both);
    }
}
