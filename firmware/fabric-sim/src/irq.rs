//! The interrupt seam: a `SOCK_SEQPACKET` socket at `/dev/uio0.irq`.
//!
//! Each message is what a UIO `read()` returns (the s32 event count) or what
//! a UIO `write()` takes (the s32 value 1, unmask). The daemon's
//! `UioIrq` speaks to it with the same code it uses on `/dev/uioN`.

use std::fs::File;
use std::io::Read;
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
        let writer = match file.try_clone() {
            Ok(w) => w,
            Err(e) => {
                log::warn!("irq socket: dup: {e}");
                continue;
            }
        };
        {
            let mut f = shared.lock();
            f.irq.conns.push(writer);
            // A new reader may be waiting for a level that is already high.
            f.deliver_irq();
        }
        log::info!("fabric-sim: daemon attached to the interrupt");
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("irq-conn".into())
            .spawn(move || read_unmasks(&s, file));
        if let Err(e) = spawned {
            log::warn!("irq socket: thread: {e}");
        }
    }
}

fn read_unmasks(shared: &Shared, mut conn: File) {
    let mut buf = [0u8; 4];
    loop {
        match conn.read(&mut buf) {
            Ok(4) => {
                if i32::from_ne_bytes(buf) == 1 {
                    let mut f = shared.lock();
                    f.irq.masked = false;
                    f.deliver_irq();
                    drop(f);
                    shared.wake();
                }
            }
            Ok(0) => {
                log::info!("fabric-sim: daemon detached from the interrupt");
                return;
            }
            Ok(n) => log::warn!("irq socket: {n}-byte write ignored (UIO takes exactly 4)"),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

pub(crate) fn close_all(shared: &Shared) {
    let f = shared.lock();
    for conn in &f.irq.conns {
        let _ = shutdown(conn.as_raw_fd(), Shutdown::Both);
    }
}
