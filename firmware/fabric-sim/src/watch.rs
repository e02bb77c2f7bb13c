//! inotify on the files whose writes have side effects on a real kernel:
//! the u-dma-buf sync attributes, configfs overlays, the FPGA manager's
//! `firmware`, and the simulator's own fault file.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use inotify::{Inotify, WatchDescriptor, WatchMask};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::{reconfig, Shared};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Watched {
    Dma,
    FpgaManager,
    Overlays,
    Overlay(String),
    SimDir,
}

pub(crate) struct Watcher {
    inotify: Inotify,
    watches: HashMap<WatchDescriptor, Watched>,
    applied: HashSet<String>,
}

impl Watcher {
    pub fn new(shared: &Shared) -> std::io::Result<Watcher> {
        let inotify = Inotify::init()?;
        let mut w = Watcher {
            inotify,
            watches: HashMap::new(),
            applied: HashSet::new(),
        };
        let p = &shared.paths;
        if p.dma_sys.is_dir() {
            w.add(&p.dma_sys, WatchMask::MODIFY, Watched::Dma)?;
        }
        w.add(
            &p.fpga_mgr,
            WatchMask::MODIFY | WatchMask::CLOSE_WRITE,
            Watched::FpgaManager,
        )?;
        if p.overlays.is_dir() {
            w.add(
                &p.overlays,
                WatchMask::CREATE | WatchMask::DELETE,
                Watched::Overlays,
            )?;
        }
        w.add(&p.sim_dir, WatchMask::CLOSE_WRITE, Watched::SimDir)?;
        Ok(w)
    }

    fn add(&mut self, path: &Path, mask: WatchMask, what: Watched) -> std::io::Result<()> {
        let wd = self.inotify.watches().add(path, mask)?;
        self.watches.insert(wd, what);
        Ok(())
    }

    pub fn run(mut self, shared: &Arc<Shared>) {
        let mut buf = vec![0u8; 64 * 1024];
        while !shared.stopping() {
            let ready = {
                let mut fds = [PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN)];
                poll(&mut fds, PollTimeout::from(100u16))
            };
            match ready {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                Err(e) => {
                    log::error!("watcher: poll: {e}");
                    return;
                }
            }
            let events: Vec<(Watched, String, bool)> = match self.inotify.read_events(&mut buf) {
                Ok(events) => events
                    .filter_map(|e| {
                        let what = self.watches.get(&e.wd)?.clone();
                        let name = e
                            .name
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let deleted = e.mask.contains(inotify::EventMask::DELETE);
                        Some((what, name, deleted))
                    })
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    log::error!("watcher: read: {e}");
                    return;
                }
            };
            for (what, name, deleted) in events {
                self.handle(shared, what, &name, deleted);
            }
        }
    }

    fn handle(&mut self, shared: &Arc<Shared>, what: Watched, name: &str, deleted: bool) {
        let p = &shared.paths;
        match what {
            Watched::Dma if name == "sync_for_device" || name == "sync_for_cpu" => {
                sync(shared, &p.dma_sys.join(name), name == "sync_for_device");
            }
            Watched::FpgaManager if name == "firmware" => {
                let firmware = read_line(&p.fpga_mgr.join("firmware"));
                if !firmware.is_empty() {
                    let _ = fs::write(p.fpga_mgr.join("firmware"), "");
                    let s = shared.clone();
                    spawn("full-load", move || reconfig::full_load(&s, &firmware));
                }
            }
            Watched::Overlays if deleted => {
                self.applied.remove(name);
                self.watches
                    .retain(|_, w| *w != Watched::Overlay(name.to_owned()));
                reconfig::remove_overlay(shared, name);
            }
            Watched::Overlays => {
                let dir = p.overlays.join(name);
                if !dir.is_dir() {
                    return;
                }
                // Watch first, then create `path`: the daemon writes it as
                // soon as it exists.
                let mask = WatchMask::CLOSE_WRITE | WatchMask::MODIFY;
                if let Err(e) = self.add(&dir, mask, Watched::Overlay(name.to_owned())) {
                    log::warn!("watcher: overlay {name}: {e}");
                    return;
                }
                let _ = fs::write(dir.join("status"), "");
                let _ = fs::write(dir.join("dtbo"), "");
                let _ = fs::write(dir.join("path"), "");
            }
            Watched::Overlay(overlay) if name == "path" => {
                let dtbo = read_line(&p.overlays.join(&overlay).join("path"));
                if dtbo.is_empty() || !self.applied.insert(overlay.clone()) {
                    return;
                }
                let s = shared.clone();
                spawn("overlay", move || {
                    reconfig::apply_overlay(&s, &overlay, &dtbo)
                });
            }
            Watched::SimDir if name == "faults" => {
                let path = p.sim_dir.join("faults");
                let text = fs::read_to_string(&path).unwrap_or_default();
                if text.trim().is_empty() {
                    return;
                }
                match crate::parse_faults(&text) {
                    Ok(faults) => {
                        log::info!("fabric-sim: injecting {faults:?}");
                        shared.lock().faults.add(faults);
                    }
                    Err(e) => log::warn!("fabric-sim: {}: {e}", path.display()),
                }
                let _ = fs::write(&path, "");
            }
            _ => {}
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    if let Err(e) = std::thread::Builder::new().name(name.into()).spawn(f) {
        log::error!("watcher: starting {name}: {e}");
    }
}

fn read_line(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Serves one u-dma-buf sync command: perform it, then answer through the
/// attribute, as [`answer`] writes it.
fn sync(shared: &Shared, path: &Path, for_device: bool) {
    // The daemon's write is a copy into a regular file, which a read can
    // catch half done (on a kernel it is a system call into u-dma-buf): a
    // command is taken once two reads in a row agree on a whole line.
    let mut last = None;
    let mut stable = None;
    for _ in 0..100 {
        let text = fs::read_to_string(path).unwrap_or_default();
        let line = text
            .split_once('\n')
            .map(|(line, _)| line.trim().to_owned());
        if line.is_some() && line == last {
            stable = line;
            break;
        }
        last = line;
        std::thread::yield_now();
    }
    let Some(line) = stable else { return };
    let Some(command) = fabric_hw::sysfs::parse_u64(&line) else {
        if line != "EINVAL" {
            log::warn!("{}: {line:?} is not a sync command", path.display());
            answer(path, &line, false);
        }
        return;
    };
    if command == 0 {
        return;
    }
    let ok = shared.lock().sync(command, for_device);
    if for_device {
        // A doorbell usually follows within microseconds.
        shared.burst.store(20, std::sync::atomic::Ordering::Relaxed);
    }
    shared.wake();
    if !ok {
        log::warn!(
            "{}: sync command {command:#x} refused (u-dma-buf would return EINVAL)",
            path.display()
        );
    }
    answer(path, &line, ok);
}

/// Answers a sync command through its attribute, atomically for the
/// daemon's reads: on a kernel a read of the attribute shows the whole old
/// value or the whole new one, and so must a read here, which the daemon
/// does through a file it holds open.
///
/// So the file is never truncated (a read could take the old length with
/// the new bytes, or the reverse) and the answer is one write over the
/// command's own line: done is the command with its digits zeroed
/// (`0x1005` becomes `0x0000`), so a read that overlaps the write sees the
/// command, zero, or a number between, which still reads as not done,
/// never a cut or empty line. A refusal is `EINVAL` (on a kernel the
/// daemon's `write()` fails instead).
fn answer(path: &Path, line: &str, done: bool) {
    use std::os::unix::fs::FileExt;
    let text = if done {
        let digits = line.strip_prefix("0x").unwrap_or(line);
        format!("0x{}\n", "0".repeat(digits.len().max(1)))
    } else {
        "EINVAL\n".to_owned()
    };
    let written = fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.write_all_at(text.as_bytes(), 0));
    if let Err(e) = written {
        log::error!("{}: answering the sync: {e}", path.display());
    }
}
