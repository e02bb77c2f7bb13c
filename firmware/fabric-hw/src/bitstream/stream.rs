//! The configuration stream after the sync word, read as the configuration
//! logic reads it: packets of 32-bit words (UG470 chapter 5, "Configuration
//! Packets"; UG570 chapter 9, the same format for UltraScale+).
//!
//! A type 1 header is `001` in bits 31:29, an opcode in 28:27 (00 NOOP,
//! 01 read, 10 write), a register address in 26:13 and a word count in
//! 10:0; that many data words follow a write. A type 2 header (`010`) has a
//! 27-bit word count and no address: it continues the type 1 packet just
//! before it, which is how frame data (FDRI) too long for 11 bits is sent.
//!
//! [`parse`] walks the packets up to the DESYNC command (or the end) and
//! keeps what the gate needs: the IDCODE written, which the device compares
//! with its own before it takes any frame (UG470 "IDCODE check"), whether
//! the START command runs the startup sequence (a full configuration does;
//! "the partial BIT file has … no startup sequence", UG909 "Downloading a
//! Partial BIT File"), and where the first frame data is.
//!
//! It reads any input without panicking and in time linear in its length:
//! every step advances at least one word, and a count is checked against
//! the words left before anything is skipped. A stream it cannot read
//! (an encrypted one, whose packets after the key header are ciphertext,
//! or a type 2 packet whose register is not named by the packet just
//! before it) is an error, never a guess.

use std::ops::Range;

use super::{config_preamble, inspect, BitstreamError, ByteOrder};

/// A type 1 NOOP.
pub const NOOP: u32 = 0x2000_0000;

/// Configuration registers (UG470 table 5-23; UG570 keeps the numbers).
pub mod reg {
    pub const FAR: u32 = 1;
    pub const FDRI: u32 = 2;
    pub const CMD: u32 = 4;
    pub const IDCODE: u32 = 12;
}

/// Commands written to CMD (UG470 table 5-25; UG570 keeps the codes).
pub mod cmd {
    pub const WCFG: u32 = 0x01;
    pub const START: u32 = 0x05;
    pub const RCRC: u32 = 0x07;
    pub const DESYNC: u32 = 0x0D;
}

/// A type 1 write header of `count` words (at most 2,047) to `reg`.
pub const fn type1_write(reg: u32, count: u32) -> u32 {
    0x3000_0000 | ((reg & 0x3FFF) << 13) | (count & 0x7FF)
}

/// A type 2 write header of `count` words (at most 2^27 - 1).
pub const fn type2_write(count: u32) -> u32 {
    0x5000_0000 | (count & 0x07FF_FFFF)
}

/// What a configuration stream says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigStream {
    /// The IDCODE written, revision nibble included.
    pub idcode: u32,
    /// Whether it issues START: the startup sequence of a full
    /// configuration, which a partial stream does not have.
    pub starts_up: bool,
    /// The first frame data written (FDRI), in bytes from the start of the
    /// configuration data (the same in either byte order).
    pub frames: Option<Range<usize>>,
}

/// Why a configuration stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Image(#[from] BitstreamError),
    #[error(
        "word {word} after the sync word: {header:#010x} is not a type 1 or type 2 packet header"
    )]
    Header { word: usize, header: u32 },
    #[error("word {word} after the sync word: a type 2 packet that does not follow a type 1 write naming its register")]
    Orphan { word: usize },
    #[error("word {word} after the sync word: a packet of {count} words runs past the end of the stream ({left} words left)")]
    Truncated {
        word: usize,
        count: usize,
        left: usize,
    },
    #[error("word {word} after the sync word: frame data before any IDCODE write (the device would refuse it)")]
    FramesBeforeIdcode { word: usize },
    #[error("word {word} after the sync word: IDCODE {second:#010x} differs from the {first:#010x} written before")]
    IdcodeChanged {
        word: usize,
        first: u32,
        second: u32,
    },
    #[error("the configuration stream writes no IDCODE")]
    NoIdcode,
}

/// Reads the configuration stream of a `.bit` or `.bin` image, in either
/// byte order.
pub fn parse(bytes: &[u8]) -> Result<ConfigStream, StreamError> {
    let info = inspect(bytes)?;
    let data = bytes.get(info.data_offset..).unwrap_or_default();
    // `inspect` found the sync word on a word boundary of data that is a
    // whole number of words, so the packets are whole words too.
    let first = info.sync_offset + 4;
    let packets = data.get(first..).unwrap_or_default();
    let word = |i: usize| -> u32 {
        let w = packets.get(i * 4..i * 4 + 4).unwrap_or(&[0; 4]);
        let w = [w[0], w[1], w[2], w[3]];
        match info.order {
            ByteOrder::Natural => u32::from_be_bytes(w),
            ByteOrder::Swapped => u32::from_le_bytes(w),
        }
    };
    let n = packets.len() / 4;
    let mut found = Found::default();
    // The register of the packet just before, if it was a type 1 write:
    // all a type 2 packet may continue.
    let mut last_write: Option<u32> = None;
    let mut i = 0;
    while i < n && !found.desync {
        let at = i;
        let header = word(i);
        i += 1;
        let op = (header >> 27) & 0b11;
        let (reg, count) = match (header >> 29, op) {
            (0b001, 0b00) | (0b001, 0b01) | (0b010, 0b01) => {
                // NOOP, or a read: no data words follow in the stream.
                last_write = None;
                continue;
            }
            (0b001, 0b10) => ((header >> 13) & 0x3FFF, (header & 0x7FF) as usize),
            (0b010, 0b10) => (
                last_write.ok_or(StreamError::Orphan { word: at })?,
                (header & 0x07FF_FFFF) as usize,
            ),
            _ => return Err(StreamError::Header { word: at, header }),
        };
        if count > n - i {
            return Err(StreamError::Truncated {
                word: at,
                count,
                left: n - i,
            });
        }
        let words = (i..i + count).map(&word);
        found.write(reg, at, words, first + i * 4..first + (i + count) * 4)?;
        last_write = (header >> 29 == 0b001).then_some(reg);
        i += count;
    }
    Ok(ConfigStream {
        idcode: found.idcode.ok_or(StreamError::NoIdcode)?,
        starts_up: found.starts_up,
        frames: found.frames,
    })
}

#[derive(Default)]
struct Found {
    idcode: Option<u32>,
    starts_up: bool,
    desync: bool,
    frames: Option<Range<usize>>,
}

impl Found {
    fn write(
        &mut self,
        reg: u32,
        at: usize,
        mut words: impl Iterator<Item = u32>,
        bytes: Range<usize>,
    ) -> Result<(), StreamError> {
        match reg {
            reg::IDCODE => {
                if let Some(second) = words.next() {
                    match self.idcode {
                        Some(first) if first != second => {
                            return Err(StreamError::IdcodeChanged {
                                word: at,
                                first,
                                second,
                            })
                        }
                        _ => self.idcode = Some(second),
                    }
                }
            }
            reg::CMD => {
                for c in words {
                    self.starts_up |= c == cmd::START;
                    self.desync |= c == cmd::DESYNC;
                }
            }
            reg::FDRI if !bytes.is_empty() => {
                if self.idcode.is_none() {
                    return Err(StreamError::FramesBeforeIdcode { word: at });
                }
                self.frames.get_or_insert(bytes);
            }
            _ => {}
        }
        Ok(())
    }
}

/// Configuration data shaped as Vivado writes it, reduced to what the gate
/// and the simulated fabric read: the preamble and sync word, a CRC reset,
/// the IDCODE write, a frame address and WCFG, `frames` (padded to a whole
/// word) as one FDRI write, START for a full configuration, then DESYNC.
/// In natural (`.bit`) order.
pub fn write_stream(idcode: u32, frames: &[u8], full: bool) -> Vec<u8> {
    let mut words = vec![
        NOOP,
        type1_write(reg::CMD, 1),
        cmd::RCRC,
        NOOP,
        NOOP,
        type1_write(reg::IDCODE, 1),
        idcode,
        type1_write(reg::FAR, 1),
        0,
        type1_write(reg::CMD, 1),
        cmd::WCFG,
        NOOP,
        type1_write(reg::FDRI, 0),
        type2_write(frames.len().div_ceil(4) as u32),
    ];
    let mut out = config_preamble();
    out.extend(words.drain(..).flat_map(u32::to_be_bytes));
    out.extend_from_slice(frames);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    if full {
        words.extend([type1_write(reg::CMD, 1), cmd::START, NOOP]);
    }
    words.extend([type1_write(reg::CMD, 1), cmd::DESYNC, NOOP, NOOP]);
    out.extend(words.into_iter().flat_map(u32::to_be_bytes));
    out
}

#[cfg(test)]
mod tests {
    use super::super::{swap_words, write_bit, SYNC_WORD};
    use super::*;
    use proptest::prelude::*;

    fn bit(data: &[u8]) -> Vec<u8> {
        write_bit("d;UserID=0X5EED0001", "xc7z020clg484-1", "c", "d", data)
    }

    #[test]
    fn reads_what_it_writes_in_either_order() {
        let data = write_stream(0x0372_7093, b"frames!", false);
        let s = parse(&bit(&data)).expect("bit");
        assert_eq!(s.idcode, 0x0372_7093);
        assert!(!s.starts_up);
        let frames = s.frames.clone().expect("frames");
        assert_eq!(&data[frames.start..frames.start + 7], b"frames!");
        assert_eq!(parse(&swap_words(&data).expect("swap")), Ok(s));
        assert!(
            parse(&write_stream(0x0372_7093, b"", true))
                .expect("full")
                .starts_up
        );
    }

    #[test]
    fn a_real_partial_preamble_reads() {
        // The words UG570's sample bitstream starts with, after the sync
        // word, up to its IDCODE write (a KU040's).
        let mut data = config_preamble();
        for w in [
            NOOP,
            NOOP,
            0x3002_2001,
            0,
            0x3002_0001,
            0,
            0x3000_8001,
            0,
            NOOP,
            0x3000_8001,
            7,
            NOOP,
            NOOP,
            0x3000_2001,
            0,
            0x3002_6001,
            0,
            0x3001_2001,
            0x0200_3FE5,
            0x3001_C001,
            0,
            0x3001_8001,
            0x0382_2093,
            0x3000_8001,
            0x0D,
        ] {
            data.extend_from_slice(&u32::to_be_bytes(w));
        }
        let s = parse(&data).expect("stream");
        assert_eq!(
            (s.idcode, s.starts_up, s.frames),
            (0x0382_2093, false, None)
        );
    }

    #[test]
    fn what_the_device_would_refuse_is_an_error() {
        let mut data = config_preamble();
        data.extend_from_slice(&u32::to_be_bytes(NOOP));
        assert_eq!(parse(&data), Err(StreamError::NoIdcode));
        let mut orphan = data.clone();
        orphan.extend_from_slice(&u32::to_be_bytes(type2_write(1)));
        orphan.extend_from_slice(&[0; 4]);
        assert_eq!(parse(&orphan), Err(StreamError::Orphan { word: 1 }));
        let mut frames = data.clone();
        for w in [type1_write(reg::FDRI, 1), 0] {
            frames.extend_from_slice(&u32::to_be_bytes(w));
        }
        assert_eq!(
            parse(&frames),
            Err(StreamError::FramesBeforeIdcode { word: 1 })
        );
        let mut short = data.clone();
        short.extend_from_slice(&u32::to_be_bytes(type1_write(reg::IDCODE, 2)));
        short.extend_from_slice(&[0; 4]);
        assert!(matches!(parse(&short), Err(StreamError::Truncated { .. })));
        let mut junk = data;
        junk.extend_from_slice(&[0xFF; 4]);
        assert!(matches!(parse(&junk), Err(StreamError::Header { .. })));
        assert!(matches!(parse(b"no sync"), Err(StreamError::Image(_))));
    }

    proptest! {
        #[test]
        fn never_panics(words in proptest::collection::vec(any::<u32>(), 0..64), swap in any::<bool>()) {
            let mut data = SYNC_WORD.to_vec();
            data.extend(words.iter().flat_map(|w| w.to_be_bytes()));
            let data = if swap { swap_words(&data).expect("words") } else { data };
            let _ = parse(&data);
            let _ = parse(&bit(&data));
        }

        #[test]
        fn any_idcode_and_frames_round_trip(idcode in any::<u32>(), frames in proptest::collection::vec(any::<u8>(), 0..64), full in any::<bool>()) {
            let s = parse(&write_stream(idcode, &frames, full)).expect("parse");
            prop_assert_eq!(s.idcode, idcode);
            prop_assert_eq!(s.starts_up, full);
            prop_assert_eq!(s.frames.is_some(), !frames.is_empty());
        }
    }
}
