//! Bitstream files: the `.bit` header (`fabric_hw::bitstream::parse_header`)
//! and the image as the catalog and the loader see it (`inspect`, `to_bin`,
//! `natural_data`).
//!
//! Beyond not panicking: a header that parses is written back by
//! `write_bit` to exactly the input; an image that inspects converts to a
//! `.bin` of its configuration data, which inspects as byte-swapped with
//! the sync word at the same offset, and whose words swapped back are the
//! natural data.
//!
//! The configuration stream's parse (the IDCODE, START and the frame data
//! after the sync word): a stream that reads gives frame data inside the
//! input, and an error says what it is.
#![no_main]

use fabric_hw::bitstream::{
    inspect, natural_data, parse_header, swap_words, to_bin, write_bit, ByteOrder, BIT_PREAMBLE,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    header(bytes);
    image(bytes);
    config_stream(bytes);
});

fn header(bytes: &[u8]) {
    match parse_header(bytes) {
        Ok(h) => {
            let data = &bytes[h.data_offset..];
            assert_eq!(h.data_len, data.len());
            assert_eq!(write_bit(&h.design, &h.part, &h.date, &h.time, data), bytes);
            let _ = (h.design_name(), h.user_id(), h.is_partial());
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

fn image(bytes: &[u8]) {
    let info = match inspect(bytes) {
        Ok(info) => info,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(to_bin(bytes).is_err() && natural_data(bytes).is_err());
            return;
        }
    };
    assert_eq!(info.data_offset + info.data_len, bytes.len());
    assert_eq!(info.data_len % 4, 0);
    assert!(info.sync_offset + 4 <= info.data_len);
    let bin = to_bin(bytes).expect("an image that inspects converts");
    let natural = natural_data(bytes).expect("an image that inspects has natural data");
    assert_eq!(bin.len(), info.data_len);
    assert_eq!(swap_words(&bin).as_ref(), Ok(&natural));
    // A .bin is told from a .bit by the preamble: data that happens to
    // start with it is not a .bin this can recognise.
    if !bin.starts_with(&BIT_PREAMBLE) {
        let again = inspect(&bin).expect("the .bin inspects");
        assert!(again.header.is_none());
        assert_eq!(again.order, ByteOrder::Swapped);
        assert_eq!(again.sync_offset, info.sync_offset);
        assert_eq!(to_bin(&bin).as_ref(), Ok(&bin));
    }
}

/// The configuration stream's parse, which the catalog's gate runs on every
/// image: no panic, frame data within the image, an error that says what.
fn config_stream(bytes: &[u8]) {
    match fabric_hw::bitstream::stream::parse(bytes) {
        Ok(s) => {
            if let Some(f) = s.frames {
                assert!(
                    f.start <= f.end && f.end <= bytes.len(),
                    "{f:?} of {}",
                    bytes.len()
                );
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}
