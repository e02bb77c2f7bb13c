//! Loads: boot images, partial reconfiguration through fpga-region
//! overlays, and full reconfiguration through the FPGA manager.
//!
//! A partial load darkens only its slot, for the image's size divided by
//! `--pr-bytes-per-sec`; the sequencer and the other slots keep running. A
//! full load darkens the whole fabric for `--full-reconfig-secs`. Both take
//! what the daemon staged under `/lib/firmware`, exactly as the kernel would,
//! and report the outcome in the same files: the overlay's `status`, the
//! manager's `state`.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use fabric_hw::bitstream::idcode;
use fabric_hw::contract::SlotState;
use fabric_hw::devtree::DtNode;
use fabric_hw::Chain;
use fabric_model::image;

use crate::config::SimConfig;
use crate::device::Loaded;
use crate::layout::region_path;
use crate::rules;
use crate::{Shared, SimError};

/// Reads an image as the device's configuration logic does, then decodes
/// its engine. The stream's IDCODE must be this device's, revision aside,
/// as on silicon: the PCAP and ICAP refuse a stream, partial or full, whose
/// IDCODE is another device's (UG470 "IDCODE check"; UG570 likewise for
/// UltraScale+), so the simulated board does too.
pub(crate) fn decode(
    config: &SimConfig,
    bytes: &[u8],
    overlay: Option<String>,
) -> Result<Loaded, String> {
    let loaded = image::load(bytes).map_err(|e| e.to_string())?;
    let device = config.device().map_err(|e| e.to_string())?;
    let written = loaded.stream.idcode;
    if written & idcode::IDCODE_DEVICE_MASK != device.idcode {
        return Err(format!(
            "IDCODE check failed: the stream writes {written:#010x} ({}), this device is {:#010x} ({})",
            idcode::by_idcode(written).map_or("an unknown device", |d| d.name()),
            device.idcode,
            config.part
        ));
    }
    Ok(Loaded {
        engine: loaded.engine,
        overlay,
    })
}

/// `--load SLOT=FILE`.
pub(crate) fn boot_image(config: &SimConfig, arg: &str) -> Result<(usize, Loaded), SimError> {
    let err = |problem: String| SimError::Load {
        arg: arg.to_owned(),
        problem,
    };
    let (slot, file) = arg
        .split_once('=')
        .ok_or_else(|| err("expected SLOT=FILE".into()))?;
    let slot: usize = slot
        .parse()
        .map_err(|_| err(format!("slot {slot:?} is not a number")))?;
    if slot >= usize::from(config.slots) {
        return Err(err(format!(
            "slot {slot} does not exist (the shell has {})",
            config.slots
        )));
    }
    let mut path = PathBuf::from(file);
    if !path.exists() && crate::layout::plain(file) {
        path = fabric_hw::Root::new(&config.root)
            .our_firmware_dir()
            .join(file);
    }
    let bytes = fs::read(&path).map_err(|e| err(format!("reading {}: {e}", path.display())))?;
    let loaded = decode(config, &bytes, None).map_err(err)?;
    log::info!(
        "fabric-sim: slot {slot} boots with engine {} ({file})",
        loaded.engine
    );
    Ok((slot, loaded))
}

/// A name under `/lib/firmware`, as the kernel's firmware loader resolves
/// it (`rules::firmware_relative`).
fn firmware_path(shared: &Shared, name: &str) -> Result<PathBuf, String> {
    Ok(shared
        .paths
        .root
        .firmware_dir()
        .join(rules::firmware_relative(name)?))
}

fn write_status(shared: &Shared, overlay: &str, status: &str) {
    let path = shared.paths.overlays.join(overlay).join("status");
    if let Err(e) = shared.paths.write_value(&path, &format!("{status}\n")) {
        log::warn!("overlay {overlay}: writing status: {e}");
    }
}

fn region_dir(shared: &Shared, slot: usize) -> PathBuf {
    let path = region_path(slot as u8);
    shared
        .paths
        .root
        .device_tree()
        .join(path.trim_start_matches('/'))
}

/// What applying an overlay came to.
enum Applied {
    /// The slot was programmed.
    Programmed(usize),
    /// The whole fabric was programmed, and the shell's devices added.
    Shell,
    /// The OF core applied the overlay, but no region took it: nothing was
    /// programmed (`rules::region_manager`).
    Quietly(String),
}

/// Applies overlay `name`, whose `path` attribute reads `dtbo`.
pub(crate) fn apply_overlay(shared: &Shared, name: &str, dtbo: &str) {
    match program_overlay(shared, name, dtbo) {
        Ok(Applied::Programmed(slot)) => {
            log::info!("fabric-sim: overlay {name} applied to slot {slot}");
            write_status(shared, name, "applied");
        }
        Ok(Applied::Shell) => {
            log::info!("fabric-sim: overlay {name} applied: the shell, afresh");
            write_status(shared, name, "applied");
        }
        Ok(Applied::Quietly(why)) => {
            log::warn!("fabric-sim: overlay {name} applied, nothing programmed: {why}");
            write_status(shared, name, "applied");
        }
        Err(e) => {
            log::warn!("fabric-sim: overlay {name} ({dtbo}): {e}");
            write_status(shared, name, "unapplied");
        }
    }
}

fn program_overlay(shared: &Shared, name: &str, dtbo: &str) -> Result<Applied, String> {
    let path = firmware_path(shared, dtbo)?;
    let blob = fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let tree = DtNode::from_blob(&blob, &path).map_err(|e| Chain(&e).to_string())?;
    // The live tree, as it is now: what the kernel's rules look at.
    let live =
        DtNode::from_dir(&shared.paths.root.device_tree()).map_err(|e| Chain(&e).to_string())?;
    rules::resolve_fixups(&tree, &live)?;
    let fragment = tree
        .walk()
        .into_iter()
        .find(|n| n.props.contains_key("target-path") || n.props.contains_key("target"))
        .ok_or("no fragment with a target or target-path")?
        .clone();
    let target = match fragment.string("target-path").map_err(|e| e.to_string())? {
        Some(path) => path,
        None => {
            // `target = <&label>`: a fixup names the label; the live
            // __symbols__ give its path.
            let label = tree
                .find("/__fixups__")
                .and_then(|f| {
                    f.props.iter().find_map(|(label, v)| {
                        let uses = String::from_utf8_lossy(v).into_owned();
                        uses.contains(&format!("{}:target:", fragment.path))
                            .then(|| label.clone())
                    })
                })
                .ok_or("the fragment's target is no label the overlay fixes up")?;
            live.find("/__symbols__")
                .and_then(|s| rules::string_prop(s, &label))
                .ok_or_else(|| format!("label {label:?} is not in the live __symbols__"))?
        }
    };
    let overlay = fragment
        .children
        .iter()
        .find(|c| c.name == "__overlay__")
        .ok_or("the fragment has no __overlay__ node")?;
    if target == crate::layout::BASE_REGION {
        let body = fragment
            .children
            .iter()
            .find(|c| c.name == "__overlay__")
            .ok_or("the fragment has no __overlay__ node")?;
        return program_shell(shared, body);
    }
    let slot = (0..shared.config.slots)
        .find(|&s| region_path(s) == target)
        .ok_or_else(|| format!("target {target:?} is not a PR region of this shell"))?
        as usize;
    let region = live
        .find(&target)
        .ok_or_else(|| format!("target {target:?} is not in the live tree"))?;
    if rules::region_manager(&live, &target).is_none() {
        return Ok(Applied::Quietly(format!(
            "region {target} has no fpga-mgr, nor an ancestor region with one: it never probed"
        )));
    }
    rules::region_bridges(&live, region)?;
    let firmware = overlay
        .string("firmware-name")
        .map_err(|e| e.to_string())?
        .ok_or("the overlay names no firmware-name")?;
    if !overlay.flag("partial-fpga-config") {
        return Err(
            "the overlay lacks partial-fpga-config: a full image cannot go into a PR region".into(),
        );
    }
    {
        let f = shared.lock();
        if let Some(other) = f.slot_overlay(slot) {
            return Err(format!(
                "region {target} already holds overlay {other}; remove it first"
            ));
        }
    }
    // The kernel decouples the region (bridge disabled) and programs it. A
    // load that fails leaves the region decoupled (fpga_region_program_fpga()
    // does not enable its bridges again): the slot reads loading, and the
    // kernel, not the shell, says what failed (the overlay's status).
    shared.lock().set_slot(slot, None, SlotState::Loading);
    shared.wake();
    let fw_path = firmware_path(shared, &firmware)?;
    let bytes = fs::read(&fw_path).map_err(|e| format!("firmware {}: {e}", fw_path.display()))?;
    let time = shared.config.scaled(Duration::from_secs_f64(
        bytes.len() as f64 / shared.config.pr_bytes_per_sec.max(1) as f64,
    ));
    std::thread::sleep(time);
    let injected = {
        let mut f = shared.lock();
        let hit = f.faults.reconfig_fail > 0;
        if hit {
            f.faults.reconfig_fail -= 1;
        }
        hit
    };
    if injected {
        return Err("injected fault: programming failed after path was accepted".into());
    }
    let loaded = decode(&shared.config, &bytes, Some(name.to_owned()))?;
    let engine = loaded.engine;
    shared
        .lock()
        .set_slot(slot, Some(loaded), SlotState::NoModel);
    shared.wake();
    // The live tree now shows the overlay's properties on the region.
    let dir = region_dir(shared, slot);
    let _ = fs::write(dir.join("firmware-name"), format!("{firmware}\0"));
    let _ = fs::write(dir.join("partial-fpga-config"), b"");
    log::info!(
        "fabric-sim: slot {slot} now holds engine {engine}, no model ({} bytes in {time:?})",
        bytes.len()
    );
    Ok(Applied::Programmed(slot))
}

/// The shell's overlay on the base region: the region programs the whole
/// fabric with its `firmware-name` (`of_fpga_region_notify_pre_apply()`),
/// then the OF core adds the shell's nodes and their devices register. A
/// region that holds an overlay already takes no second one.
fn program_shell(shared: &Shared, body: &DtNode) -> Result<Applied, String> {
    use std::sync::atomic::Ordering;
    if shared.shell_in_tree.load(Ordering::SeqCst) {
        return Err(format!(
            "{}: Region already has overlay applied (of_fpga_region_notify_pre_apply)",
            crate::layout::BASE_REGION
        ));
    }
    let firmware = body
        .string("firmware-name")
        .map_err(|e| e.to_string())?
        .ok_or("the shell overlay names no firmware-name")?;
    set_state(shared, "firmware request");
    let image = firmware_path(shared, &firmware)
        .and_then(|p| fs::read(&p).map_err(|e| format!("{}: {e}", p.display())))
        .and_then(|bytes| decode(&shared.config, &bytes, None));
    let loaded = match image {
        Ok(l) => l,
        Err(e) => {
            set_state(shared, "firmware request error");
            return Err(e);
        }
    };
    set_state(shared, "write");
    let dark = shared
        .config
        .scaled(Duration::from_secs_f64(shared.config.full_reconfig_secs));
    log::info!("fabric-sim: the base region programs {firmware}: dark for {dark:?}");
    shared.lock().go_dark(dark, Some(loaded));
    shared.wake();
    std::thread::sleep(dark);
    while shared.lock().is_dark() && !shared.stopping() {
        shared.wake();
        std::thread::sleep(Duration::from_millis(1));
    }
    set_state(shared, "operating");
    let region = shared
        .paths
        .root
        .device_tree()
        .join(crate::layout::BASE_REGION.trim_start_matches('/'));
    let added = (|| {
        for child in &body.children {
            child.write_dir(&region.join(&child.name))?;
        }
        fs::write(region.join("firmware-name"), format!("{firmware}\0"))?;
        crate::layout::create_uio(&shared.config, &shared.paths)
    })();
    added.map_err(|e| format!("adding the shell's nodes: {e}"))?;
    shared.shell_in_tree.store(true, Ordering::SeqCst);
    Ok(Applied::Shell)
}

/// The shell's overlay was removed: its nodes go from the live tree and
/// its devices unregister; the PL keeps its configuration. The OF core
/// removes only the topmost overlays (`of_overlay_remove()`): with a slot's
/// overlay still on a region the shell's added, the shell stays.
fn remove_shell(shared: &Shared) {
    use std::sync::atomic::Ordering;
    let on_top = {
        let f = shared.lock();
        (0..f.slot_count()).find_map(|s| f.slot_overlay(s))
    };
    if let Some(other) = on_top {
        log::warn!(
            "fabric-sim: overlay {} not removed: {other} is on top of it (not topmost)",
            crate::layout::SHELL_OVERLAY
        );
        return;
    }
    let root = &shared.paths.root;
    let region = root
        .device_tree()
        .join(crate::layout::BASE_REGION.trim_start_matches('/'));
    if let Ok(entries) = fs::read_dir(&region) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else if entry.file_name() == "firmware-name" {
                fs::remove_file(&path)
            } else {
                Ok(())
            };
        }
    }
    let _ = fs::remove_dir_all(
        root.uio_class()
            .join(format!("uio{}", shared.uio_number.load(Ordering::Relaxed))),
    );
    shared.shell_in_tree.store(false, Ordering::SeqCst);
    log::info!("fabric-sim: the shell's overlay removed: its nodes and devices are gone");
}

/// Overlay `name` was removed: its region is emptied and stays decoupled.
pub(crate) fn remove_overlay(shared: &Shared, name: &str) {
    if name == crate::layout::SHELL_OVERLAY {
        return remove_shell(shared);
    }
    let slot = {
        let f = shared.lock();
        (0..f.slot_count()).find(|&s| f.slot_overlay(s).as_deref() == Some(name))
    };
    if let Some(slot) = slot {
        shared.lock().set_slot(slot, None, SlotState::Empty);
        shared.wake();
        let dir = region_dir(shared, slot);
        let _ = fs::remove_file(dir.join("firmware-name"));
        let _ = fs::remove_file(dir.join("partial-fpga-config"));
        log::info!("fabric-sim: overlay {name} removed, slot {slot} empty");
    }
}

fn set_state(shared: &Shared, state: &str) {
    debug_assert!(rules::MANAGER_STATES.contains(&state), "{state:?}");
    let path = shared.paths.fpga_mgr.join("state");
    if let Err(e) = shared.paths.write_value(&path, &format!("{state}\n")) {
        log::warn!("fpga manager: writing state: {e}");
    }
}

/// The shell's UIO device comes back under the next number: its sysfs
/// directory, device node and interrupt socket move from uioN to uioN+1.
/// The node is the same file under a new name (the simulator's own mapping
/// stays valid); the daemon must find it again by name.
fn renumber_uio(shared: &Shared) -> std::io::Result<()> {
    use std::sync::atomic::Ordering;
    let root = &shared.paths.root;
    let n = shared.uio_number.load(Ordering::Relaxed);
    let (old, new) = (format!("uio{n}"), format!("uio{}", n + 1));
    // The node and the interrupt first, sysfs last, as create_uio: whoever
    // finds uioN+1 in sysfs can open all of it.
    fs::hard_link(root.dev(&old), root.dev(&new))?;
    fs::remove_file(root.dev(&old))?;
    fs::rename(
        root.dev(&format!("{old}.irq")),
        root.dev(&format!("{new}.irq")),
    )?;
    fs::rename(root.uio_class().join(&old), root.uio_class().join(&new))?;
    shared.uio_number.store(n + 1, Ordering::Relaxed);
    log::info!(
        "fabric-sim: the shell's UIO device is now {}",
        root.dev(&new).display()
    );
    Ok(())
}

/// The FPGA manager's `firmware` was written.
pub(crate) fn full_load(shared: &Shared, firmware: &str) {
    let flags = fs::read_to_string(shared.paths.fpga_mgr.join("flags"))
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    if flags & fabric_hw::fpga::FLAG_PARTIAL != 0 {
        log::warn!("fabric-sim: partial load of {firmware} through the manager refused: use the slot's fpga-region overlay");
        set_state(shared, "write error");
        return;
    }
    set_state(shared, "write init");
    let image = firmware_path(shared, firmware)
        .and_then(|p| fs::read(&p).map_err(|e| format!("{}: {e}", p.display())))
        .and_then(|bytes| decode(&shared.config, &bytes, None));
    let fpga_error = {
        let mut f = shared.lock();
        let hit = f.faults.fpga_error > 0;
        if hit {
            f.faults.fpga_error -= 1;
        }
        hit
    };
    let dark = shared
        .config
        .scaled(Duration::from_secs_f64(shared.config.full_reconfig_secs));
    match image {
        Ok(loaded) if !fpga_error => {
            set_state(shared, "write");
            log::info!("fabric-sim: full reconfiguration with {firmware}: dark for {dark:?}");
            shared.lock().go_dark(dark, Some(loaded));
            shared.wake();
            // The device comes back under its new number while the fabric
            // is dark, before the shell answers again: a kernel's load
            // returns with the device settled, so whoever sees the new image
            // must also find the new number (renumbered after power-on, a
            // daemon could look in between and find the old one).
            if shared.config.renumber_uio {
                if let Err(e) = renumber_uio(shared) {
                    log::warn!("fabric-sim: renumbering the shell's UIO device: {e}");
                }
            }
            std::thread::sleep(dark);
            // The sequencer powers the shell on at the end of the dark
            // period; wait until it has.
            while shared.lock().is_dark() && !shared.stopping() {
                shared.wake();
                std::thread::sleep(Duration::from_millis(1));
            }
            set_state(shared, "operating");
        }
        Ok(_) => {
            log::warn!("fabric-sim: injected fault: full load of {firmware} fails");
            set_state(shared, "write error");
        }
        Err(e) => {
            log::warn!("fabric-sim: full load of {firmware}: {e}");
            set_state(shared, "write error");
        }
    }
}
