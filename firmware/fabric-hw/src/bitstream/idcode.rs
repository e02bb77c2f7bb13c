//! Which device an IDCODE names, for the parts this project supports.
//!
//! A configuration stream writes the device's IDCODE before any frame, and
//! the configuration logic refuses a stream whose IDCODE is not its own
//! (UG470 "IDCODE check" for 7-series and Zynq-7000, UG570 for UltraScale+:
//! "If written IDCODE does not match device IDCODE, then error"). The top
//! four bits are the silicon revision and take no part in that comparison
//! (UG470, UG570), so every comparison here masks them off.
//!
//! Where the values come from: openFPGALoader's device table
//! (`src/part.hpp`, which follows the vendor's: UG470/UG585 for the
//! Zynq-7000, UG570 for ZynqMP), checked against JTAG scans of the boards
//! in public scripts (a KV260's chain reads `xck26 (idcode 04724093 …)` in
//! `xsdb`). The K26 SOM's device carries a ZU5EV-class die but reads its
//! own IDCODE, 0x04724093, not the XCZU5EV's 0x04720093: a stream built for
//! one is refused by the other, so they are two rows.

/// The bits of an IDCODE that name the device: all but the revision.
pub const IDCODE_DEVICE_MASK: u32 = 0x0FFF_FFFF;

/// A device of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    /// The IDCODE with its revision nibble zero.
    pub idcode: u32,
    /// The device names that carry it, as a part name starts
    /// (`xc7z020` for `xc7z020clg484-1`). Vivado's CG, EG and EV variants
    /// of one ZynqMP die share an IDCODE.
    pub names: &'static [&'static str],
    /// The board this project runs on with it.
    pub board: &'static str,
}

/// The devices this project supports.
pub const DEVICES: &[Device] = &[
    Device {
        idcode: 0x0472_4093,
        names: &["xck26"],
        board: "KV260 (K26 SOM)",
    },
    Device {
        idcode: 0x0472_0093,
        names: &["xczu5ev", "xczu5eg", "xczu5cg"],
        board: "ZynqMP ZU5 boards",
    },
    Device {
        idcode: 0x0372_7093,
        names: &["xc7z020"],
        board: "ZedBoard",
    },
    Device {
        idcode: 0x0373_1093,
        names: &["xc7z045"],
        board: "ZC706",
    },
];

impl Device {
    /// The first of its names, for messages.
    pub fn name(&self) -> &'static str {
        self.names.first().copied().unwrap_or("?")
    }
}

/// The device whose IDCODE is `idcode`, whatever its revision.
pub fn by_idcode(idcode: u32) -> Option<&'static Device> {
    DEVICES
        .iter()
        .find(|d| d.idcode == idcode & IDCODE_DEVICE_MASK)
}

/// The device a part name names: `xck26-sfvc784-2LV-c`, `xc7z020clg484-1`,
/// or as a `.bit` header may write it, without the `xc` prefix
/// (`7z020clg484`). `None` for a part this table does not know.
pub fn by_part(part: &str) -> Option<&'static Device> {
    let part = part.trim().to_ascii_lowercase();
    let part = if part.starts_with("xc") {
        part
    } else {
        format!("xc{part}")
    };
    DEVICES.iter().find(|d| {
        d.names.iter().any(|name| {
            // `xc7z020` names `xc7z020clg484` but not a longer device
            // number such as `xc7z0201`.
            part.strip_prefix(name)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boards_parts_are_known() {
        assert_eq!(
            by_part("xck26-sfvc784-2LV-c").map(|d| d.idcode),
            Some(0x0472_4093)
        );
        assert_eq!(
            by_part("xczu5ev-sfvc784-2-i").map(|d| d.idcode),
            Some(0x0472_0093)
        );
        assert_eq!(
            by_part("xc7z020clg484-1").map(|d| d.idcode),
            Some(0x0372_7093)
        );
        assert_eq!(by_part("7z020clg400").map(|d| d.idcode), Some(0x0372_7093));
        assert_eq!(
            by_part("xc7z045ffg900-2").map(|d| d.idcode),
            Some(0x0373_1093)
        );
        assert_eq!(by_part("xc7z010clg400-1"), None);
        assert_eq!(by_part("xc7z0201"), None);
        assert_eq!(by_part(""), None);
    }

    #[test]
    fn the_revision_nibble_is_ignored() {
        // The ZC706's XC7Z045 reads 0x23731093 on current silicon.
        assert_eq!(by_idcode(0x2373_1093).map(Device::name), Some("xc7z045"));
        assert_eq!(by_idcode(0x0372_7093).map(Device::name), Some("xc7z020"));
        assert_eq!(by_idcode(0x0372_2093), None);
    }
}
