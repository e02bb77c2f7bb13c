//! The gate every image passes, `.bit` or headerless `.bin`: when the
//! catalog is read (so `fabricctl models` lists an image that fails it as
//! unusable, with the reason) and again before a load stages anything (the
//! file is read afresh; it may have changed since).
//!
//! What an image is for is said in up to four places, and all must agree:
//! the manifest (`part`, `kind`), the `.bit` header if there is one (part,
//! `PARTIAL=TRUE`, `UserID`), the configuration stream (the IDCODE the
//! device checks before it takes a frame, and START, which only a full
//! configuration issues), and the board (its part, its shell's interface
//! id). The stream is the one a headerless image cannot leave out, and the
//! one the device itself obeys, so it is read for every image: an IDCODE
//! this daemon does not know is an unknown part, not a guess.
//!
//! A partial stream is told from a full one by START: "the partial BIT file
//! has … no startup sequence" (UG909, "Downloading a Partial BIT File"), and
//! a full configuration ends with one. An encrypted stream hides its
//! commands, so it cannot be read here and is refused.

use fabric_hw::bitstream::{self, idcode, stream};

use super::{ImageEntry, ImageKind};

/// What the images are checked against: this board's part and its shell's
/// interface id. Without one (tools that read a catalog off the board) the
/// images are checked against each other and the manifest's shell only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    pub part: String,
    pub interface_id: u32,
}

/// Why an image may not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("{file}: kind = {value} in the manifest is neither \"partial\" nor \"full\"")]
    Kind { file: String, value: String },
    #[error("{file}: reading its configuration stream: {source}")]
    Stream {
        file: String,
        source: stream::StreamError,
    },
    #[error("{file}: its configuration stream writes IDCODE {idcode:#010x}, a part this daemon does not know (unknown part)")]
    UnknownPart { file: String, idcode: u32 },
    #[error("{file}: {claim} names part {part:?}, this board is {board:?}")]
    WrongPart {
        file: String,
        claim: String,
        part: String,
        board: String,
    },
    #[error("{file}: {claim} names part {part:?}, but its configuration stream writes IDCODE {idcode:#010x}, the {device}'s")]
    Disagree {
        file: String,
        claim: &'static str,
        part: String,
        idcode: u32,
        device: &'static str,
    },
    #[error("{file}: UserID {found} is not the shell's interface id {shell:#010x}: it was built for another shell")]
    WrongInterface {
        file: String,
        found: String,
        shell: u32,
    },
    #[error("{file}: the manifest says kind = \"{declared}\", but {evidence}: a {found} image")]
    WrongKind {
        file: String,
        declared: ImageKind,
        found: ImageKind,
        evidence: &'static str,
    },
}

impl GateError {
    /// The type string `fabricctl` shows for a load it refuses.
    pub fn kind(&self) -> &'static str {
        match self {
            GateError::UnknownPart { .. }
            | GateError::WrongPart { .. }
            | GateError::Disagree { .. } => "wrong_part",
            GateError::WrongInterface { .. } => "wrong_shell",
            GateError::Kind { .. } | GateError::Stream { .. } | GateError::WrongKind { .. } => {
                "bad_image"
            }
        }
    }
}

/// Whether a part name (the manifest's, or a `.bit` header's) names this
/// board's part. Vivado writes parts with or without the `xc` prefix and
/// the speed grade (`7z020clg484` for `xc7z020clg484-1`).
pub fn part_matches(part: &str, board: &str) -> bool {
    let norm = |p: &str| {
        let p = p.trim().to_ascii_lowercase();
        p.strip_prefix("xc").map(str::to_owned).unwrap_or(p)
    };
    let (h, b) = (norm(part), norm(board));
    !h.is_empty() && (h == b || b.starts_with(&format!("{h}-")))
}

/// Checks `image` (its bytes already hashed against the manifest) against
/// itself, the manifest's shell (`interface_id`) and, when known, the
/// board; gives back what its stream says.
pub fn check(
    image: &ImageEntry,
    bytes: &[u8],
    interface_id: u32,
    board: Option<&str>,
) -> Result<stream::ConfigStream, GateError> {
    let file = || image.file.clone();
    let declared = match &image.kind {
        Ok(k) => *k,
        Err(value) => {
            return Err(GateError::Kind {
                file: file(),
                value: value.clone(),
            })
        }
    };
    let config = stream::parse(bytes).map_err(|source| GateError::Stream {
        file: file(),
        source,
    })?;
    let device = idcode::by_idcode(config.idcode).ok_or(GateError::UnknownPart {
        file: file(),
        idcode: config.idcode,
    })?;
    // `parse` has read the header already; it cannot fail here.
    let header = bitstream::inspect(bytes).ok().and_then(|i| i.header);
    let wrong_part = |claim: String, part: &str, board: &str| GateError::WrongPart {
        file: file(),
        claim,
        part: part.to_owned(),
        board: board.to_owned(),
    };
    if let Some(board) = board {
        // The stream first: it is what the device obeys.
        if idcode::by_part(board) != Some(device) {
            let claim = format!("its configuration stream's IDCODE {:#010x}", config.idcode);
            return Err(wrong_part(claim, device.name(), board));
        }
        if !part_matches(&image.part, board) {
            return Err(wrong_part("the manifest".into(), &image.part, board));
        }
        if let Some(h) = &header {
            if !part_matches(&h.part, board) {
                return Err(wrong_part("its .bit header".into(), &h.part, board));
            }
        }
    }
    let disagree = |claim, part: &str| GateError::Disagree {
        file: file(),
        claim,
        part: part.to_owned(),
        idcode: config.idcode,
        device: device.name(),
    };
    if idcode::by_part(&image.part) != Some(device) {
        return Err(disagree("the manifest", &image.part));
    }
    if let Some(h) = &header {
        if idcode::by_part(&h.part) != Some(device) {
            return Err(disagree("its .bit header", &h.part));
        }
        if h.user_id() != Some(interface_id) {
            return Err(GateError::WrongInterface {
                file: file(),
                found: h.attribute("UserID").unwrap_or("none").to_owned(),
                shell: interface_id,
            });
        }
        let found = ImageKind::partial_if(h.is_partial());
        if found != declared {
            return Err(GateError::WrongKind {
                file: file(),
                declared,
                found,
                evidence: if h.is_partial() {
                    "its .bit header says PARTIAL=TRUE"
                } else {
                    "its .bit header has no PARTIAL=TRUE"
                },
            });
        }
    }
    let found = ImageKind::partial_if(!config.starts_up);
    if found != declared {
        return Err(GateError::WrongKind {
            file: file(),
            declared,
            found,
            evidence: if config.starts_up {
                "its configuration stream issues START (a full configuration's startup sequence)"
            } else {
                "its configuration stream has no START (no startup sequence)"
            },
        });
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_match_with_or_without_prefix_and_grade() {
        assert!(part_matches("xck26-sfvc784-2LV-c", "xck26-sfvc784-2LV-c"));
        assert!(part_matches("7z020clg484", "xc7z020clg484-1"));
        assert!(part_matches("xc7z045ffg900-2", "xc7z045ffg900-2"));
        assert!(!part_matches("7z020clg400", "xc7z020clg484-1"));
        assert!(!part_matches("xczu5ev-sfvc784-2-i", "xck26-sfvc784-2LV-c"));
        assert!(!part_matches("", "xck26"));
    }
}
