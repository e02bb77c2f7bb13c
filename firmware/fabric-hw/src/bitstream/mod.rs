//! Xilinx bitstreams: the `.bit` header, the sync word, and the byte-swapped
//! `.bin` that the Zynq FPGA managers load.
//!
//! A `.bit` starts `00 09` + `0F F0 0F F0 0F F0 0F F0 00` + `00 01`, then
//! fields of a tag byte, a big-endian u16 length and a NUL-terminated string:
//! `a` design name (`top;PARTIAL=TRUE;UserID=0X…;Version=…`), `b` part, `c`
//! date, `d` time; then `e`, a big-endian **u32** length and the configuration
//! data. The data starts with `FF…FF` padding, the bus-width pattern
//! `000000BB 11220044`, `FFFFFFFF` and the sync word `AA995566`.
//!
//! The Zynq-7000 manager refuses a full `.bit` ("Bitstream must be a byte
//! swapped .bin file"): it wants the configuration data alone with every
//! 32-bit word byte-swapped, so the sync word reads `66 55 99 AA`.
//! [`to_bin`] makes that form.
//!
//! # Layout
//! - this file: the `.bit` header, the sync word, the byte orders.
//! - [`stream`]: the packets after the sync word (the IDCODE written, START,
//!   the frame data), read without panicking on any input.
//! - [`idcode`]: which device an IDCODE names, for the supported parts.

pub mod idcode;
pub mod stream;

/// The sync word in `.bit` byte order.
pub const SYNC_WORD: [u8; 4] = [0xAA, 0x99, 0x55, 0x66];
/// The sync word as a byte-swapped `.bin` stores it.
pub const SYNC_WORD_SWAPPED: [u8; 4] = [0x66, 0x55, 0x99, 0xAA];
/// The fixed 13-byte preamble of a `.bit` file.
pub const BIT_PREAMBLE: [u8; 13] = [
    0x00, 0x09, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x0F, 0xF0, 0x00, 0x00, 0x01,
];
/// Bytes of the configuration data searched for the sync word.
const SYNC_SEARCH: usize = 4096;

/// Why a bitstream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitstreamError {
    #[error("the file is {len} bytes, too short for a bitstream")]
    TooShort { len: usize },
    #[error("field {tag:?} at byte {offset}: {problem}")]
    Field {
        tag: char,
        offset: usize,
        problem: String,
    },
    #[error("the data length field says {declared} bytes at offset {offset}, but the file has {actual} bytes after it")]
    Length {
        declared: u64,
        offset: usize,
        actual: usize,
    },
    #[error("no sync word (AA995566 or its byte-swapped form) in the first {SYNC_SEARCH} bytes of configuration data")]
    NoSync,
    #[error("configuration data of {len} bytes is not a whole number of 32-bit words")]
    NotWords { len: usize },
}

/// The fields of a `.bit` header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BitHeader {
    /// Field `a`: design name and its `;`-separated attributes.
    pub design: String,
    /// Field `b`: the part, e.g. `xczu5ev-sfvc784-2-i`.
    pub part: String,
    /// Field `c`.
    pub date: String,
    /// Field `d`.
    pub time: String,
    /// Where the configuration data starts in the file.
    pub data_offset: usize,
    /// Its length.
    pub data_len: usize,
}

impl BitHeader {
    /// The value of a `KEY=VALUE` attribute of the design field.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.design
            .split(';')
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    /// The design name without attributes.
    pub fn design_name(&self) -> &str {
        self.design.split(';').next().unwrap_or_default()
    }

    /// `UserID=0X…` as a number.
    pub fn user_id(&self) -> Option<u32> {
        let v = self.attribute("UserID")?;
        let hex = v.strip_prefix("0X").or_else(|| v.strip_prefix("0x"))?;
        u32::from_str_radix(hex, 16).ok()
    }

    /// Whether the design is a partial (`PARTIAL=TRUE`) bitstream.
    pub fn is_partial(&self) -> bool {
        self.attribute("PARTIAL")
            .is_some_and(|v| v.eq_ignore_ascii_case("TRUE"))
    }
}

/// How a configuration image is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ByteOrder {
    /// Words as in a `.bit` (sync word `AA 99 55 66`).
    Natural,
    /// Every 32-bit word byte-swapped, as the Zynq managers load it.
    Swapped,
}

/// A bitstream file: `.bit` with its header, or headerless `.bin`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImageInfo {
    /// The header, when the file is a `.bit`.
    pub header: Option<BitHeader>,
    pub order: ByteOrder,
    /// Offset of the sync word within the configuration data.
    pub sync_offset: usize,
    pub data_offset: usize,
    pub data_len: usize,
}

/// Parses a `.bit` header.
pub fn parse_header(bytes: &[u8]) -> Result<BitHeader, BitstreamError> {
    if bytes.len() < BIT_PREAMBLE.len() + 3 {
        return Err(BitstreamError::TooShort { len: bytes.len() });
    }
    if bytes[..BIT_PREAMBLE.len()] != BIT_PREAMBLE {
        return Err(BitstreamError::Field {
            tag: '-',
            offset: 0,
            problem: "the file does not start with the .bit preamble 00 09 0F F0 …".into(),
        });
    }
    let mut at = BIT_PREAMBLE.len();
    let mut strings = [String::new(), String::new(), String::new(), String::new()];
    for (i, want) in ['a', 'b', 'c', 'd'].into_iter().enumerate() {
        let field = |problem: String| BitstreamError::Field {
            tag: want,
            offset: at,
            problem,
        };
        let tag = *bytes
            .get(at)
            .ok_or_else(|| field("file ends before the field".into()))?;
        if tag != want as u8 {
            return Err(field(format!("found tag {:?} instead", tag as char)));
        }
        let len_bytes = bytes
            .get(at + 1..at + 3)
            .ok_or_else(|| field("file ends inside the length".into()))?;
        let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
        let text = bytes
            .get(at + 3..at + 3 + len)
            .ok_or_else(|| field(format!("length {len} runs past the end of the file")))?;
        let text = text
            .strip_suffix(&[0])
            .ok_or_else(|| field("string is not NUL-terminated".into()))?;
        strings[i] =
            String::from_utf8(text.to_vec()).map_err(|_| field("string is not UTF-8".into()))?;
        at += 3 + len;
    }
    match bytes.get(at) {
        Some(b'e') => {}
        Some(&t) => {
            return Err(BitstreamError::Field {
                tag: 'e',
                offset: at,
                problem: format!("found tag {:?} instead", t as char),
            })
        }
        None => {
            return Err(BitstreamError::Field {
                tag: 'e',
                offset: at,
                problem: "file ends before the data field".into(),
            })
        }
    }
    let len_bytes = bytes.get(at + 1..at + 5).ok_or(BitstreamError::Field {
        tag: 'e',
        offset: at,
        problem: "file ends inside the length".into(),
    })?;
    let declared = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
    let data_offset = at + 5;
    let actual = bytes.len() - data_offset;
    if u64::from(declared) != actual as u64 {
        return Err(BitstreamError::Length {
            declared: declared.into(),
            offset: data_offset,
            actual,
        });
    }
    let [design, part, date, time] = strings;
    Ok(BitHeader {
        design,
        part,
        date,
        time,
        data_offset,
        data_len: actual,
    })
}

/// Finds the sync word in configuration data and says which byte order the
/// data is in.
pub fn find_sync(data: &[u8]) -> Option<(usize, ByteOrder)> {
    let window = &data[..data.len().min(SYNC_SEARCH)];
    window.windows(4).enumerate().find_map(|(i, w)| {
        if i % 4 != 0 {
            None
        } else if w == SYNC_WORD {
            Some((i, ByteOrder::Natural))
        } else if w == SYNC_WORD_SWAPPED {
            Some((i, ByteOrder::Swapped))
        } else {
            None
        }
    })
}

/// Identifies a `.bit` or `.bin` image.
pub fn inspect(bytes: &[u8]) -> Result<ImageInfo, BitstreamError> {
    let (header, data_offset) = if bytes.starts_with(&BIT_PREAMBLE) {
        let h = parse_header(bytes)?;
        let off = h.data_offset;
        (Some(h), off)
    } else {
        (None, 0)
    };
    let data = &bytes[data_offset..];
    if !data.len().is_multiple_of(4) {
        return Err(BitstreamError::NotWords { len: data.len() });
    }
    let (sync_offset, order) = find_sync(data).ok_or(BitstreamError::NoSync)?;
    Ok(ImageInfo {
        header,
        order,
        sync_offset,
        data_offset,
        data_len: data.len(),
    })
}

/// Swaps the bytes of every 32-bit word.
pub fn swap_words(data: &[u8]) -> Result<Vec<u8>, BitstreamError> {
    if !data.len().is_multiple_of(4) {
        return Err(BitstreamError::NotWords { len: data.len() });
    }
    Ok(data
        .chunks_exact(4)
        .flat_map(|w| [w[3], w[2], w[1], w[0]])
        .collect())
}

/// The image the Zynq FPGA managers load: configuration data only, words
/// byte-swapped. A `.bin` that is already swapped is returned as it is.
pub fn to_bin(bytes: &[u8]) -> Result<Vec<u8>, BitstreamError> {
    let info = inspect(bytes)?;
    let data = &bytes[info.data_offset..];
    match info.order {
        ByteOrder::Swapped => Ok(data.to_vec()),
        ByteOrder::Natural => swap_words(data),
    }
}

/// The configuration data in natural (`.bit`) order, from either form.
pub fn natural_data(bytes: &[u8]) -> Result<Vec<u8>, BitstreamError> {
    let info = inspect(bytes)?;
    let data = &bytes[info.data_offset..];
    match info.order {
        ByteOrder::Natural => Ok(data.to_vec()),
        ByteOrder::Swapped => swap_words(data),
    }
}

/// Builds a `.bit` file from its header fields and configuration data.
pub fn write_bit(design: &str, part: &str, date: &str, time: &str, data: &[u8]) -> Vec<u8> {
    let mut out = BIT_PREAMBLE.to_vec();
    for (tag, text) in [(b'a', design), (b'b', part), (b'c', date), (b'd', time)] {
        out.push(tag);
        let len = u16::try_from(text.len() + 1).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&text.as_bytes()[..usize::from(len) - 1]);
        out.push(0);
    }
    out.push(b'e');
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// The start of configuration data as Vivado writes it: padding, the
/// bus-width detection pattern, and the sync word, in natural order.
pub fn config_preamble() -> Vec<u8> {
    let mut out = vec![0xFF; 32];
    out.extend_from_slice(&[0x00, 0x00, 0x00, 0xBB, 0x11, 0x22, 0x00, 0x44]);
    out.extend_from_slice(&[0xFF; 8]);
    out.extend_from_slice(&SYNC_WORD);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        let mut data = config_preamble();
        data.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        write_bit(
            "fabricd_rm_kjv;PARTIAL=TRUE;UserID=0X5EED0001;Version=2024.2",
            "xczu5ev-sfvc784-2-i",
            "2026/11/30",
            "14:30:00",
            &data,
        )
    }

    #[test]
    fn parses_a_partial_header() {
        let bit = sample();
        let h = parse_header(&bit).expect("header");
        assert_eq!(h.design_name(), "fabricd_rm_kjv");
        assert_eq!(h.part, "xczu5ev-sfvc784-2-i");
        assert_eq!(h.user_id(), Some(0x5EED_0001));
        assert!(h.is_partial());
        let info = inspect(&bit).expect("inspect");
        assert_eq!(info.order, ByteOrder::Natural);
        assert_eq!(info.sync_offset, 48);
    }

    #[test]
    fn bin_is_swapped_and_round_trips() {
        let bit = sample();
        let bin = to_bin(&bit).expect("bin");
        let info = inspect(&bin).expect("inspect bin");
        assert!(info.header.is_none());
        assert_eq!(info.order, ByteOrder::Swapped);
        assert_eq!(&bin[48..52], &SYNC_WORD_SWAPPED);
        // Converting an already swapped image changes nothing.
        assert_eq!(to_bin(&bin).expect("again"), bin);
        assert_eq!(
            natural_data(&bin).expect("natural"),
            natural_data(&bit).expect("natural")
        );
    }

    #[test]
    fn a_wrong_length_is_caught() {
        let mut bit = sample();
        bit.push(0);
        assert!(matches!(
            parse_header(&bit),
            Err(BitstreamError::Length { .. })
        ));
        bit.truncate(bit.len() - 5);
        assert!(matches!(
            parse_header(&bit),
            Err(BitstreamError::Length { .. })
        ));
    }

    #[test]
    fn no_sync_word_is_refused() {
        let bit = write_bit("x", "y", "z", "w", &[0xFF; 64]);
        assert_eq!(inspect(&bit), Err(BitstreamError::NoSync));
    }

    proptest! {
        #[test]
        fn header_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut with_preamble = BIT_PREAMBLE.to_vec();
            with_preamble.extend_from_slice(&bytes);
            let _ = parse_header(&with_preamble);
            let _ = inspect(&bytes);
        }

        #[test]
        fn truncation_is_always_an_error(cut in 0usize..100) {
            let bit = sample();
            let cut = cut.min(bit.len() - 1);
            prop_assert!(parse_header(&bit[..cut]).is_err());
        }
    }
}
