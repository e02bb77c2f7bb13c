//! An engine as a Xilinx bitstream (contract 2.0: a partial bitstream
//! carries an engine; its model is a table the daemon commits from DDR).
//!
//! The configuration data is shaped as Vivado writes it
//! ([`stream::write_stream`]): the preamble and sync word, the IDCODE of
//! the part the image is for, and the engine as the frame data of one FDRI
//! write (`FBRENGN1`, a little-endian u32 length, the engine's id as
//! `SLOT_ENGINE` reads it, zeros to [`ENGINE_IMAGE_BYTES`]); a full image
//! also issues START, as a full configuration's startup sequence does. The
//! simulated fabric reads the stream of the image it is given (natural or
//! byte-swapped), checks its IDCODE as the device would, and decodes the
//! frames.
//!
//! A partial bitstream is as large as its partition's configuration frames,
//! whatever the module in it (UG909, "Defining Reconfigurable Partition
//! Boundaries": "The size of a partial bit file depends on the number and
//! type of frames included"), so an engine image is padded to the size of
//! one: a PYNQ-Z2 (XC7Z020) partition's was reported at 668 kB
//! (discuss.pynq.io, "Accelerating the partial reconfiguration process").

use fabric_hw::bitstream::{self, idcode, stream, BitHeader, BitstreamError};
use fabric_hw::contract::EngineId;

const PAYLOAD_MAGIC: &[u8; 8] = b"FBRENGN1";
/// Bytes of frame data an engine image carries.
pub const ENGINE_IMAGE_BYTES: usize = 1 << 20;
/// The Vivado version our images claim, in the design field.
pub const TOOL_VERSION: &str = "2024.2";

/// Why an image could not be built or read as a model.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Bitstream(#[from] BitstreamError),
    #[error(transparent)]
    Stream(#[from] stream::StreamError),
    #[error("part {0:?} is not one this project knows the IDCODE of")]
    UnknownPart(String),
    #[error("the configuration stream writes no frame data")]
    NoFrames,
    #[error("the frame data does not hold a fabricd engine")]
    NotAnEngine,
    #[error("the engine payload claims {declared} bytes, the image has {available}")]
    Truncated { declared: usize, available: usize },
}

/// What goes into an image's header.
#[derive(Debug, Clone)]
pub struct ImageSpec<'a> {
    pub design: &'a str,
    pub part: &'a str,
    pub interface_id: u32,
    pub partial: bool,
    pub date: &'a str,
    pub time: &'a str,
}

/// The design field: `name;PARTIAL=TRUE;UserID=0X…;Version=…`.
pub fn design_field(spec: &ImageSpec<'_>) -> String {
    let partial = if spec.partial { ";PARTIAL=TRUE" } else { "" };
    format!(
        "{}{partial};UserID=0X{:08X};Version={TOOL_VERSION}",
        spec.design, spec.interface_id
    )
}

/// Builds the `.bit` of an engine for `spec.part`.
pub fn build_bit(engine: EngineId, spec: &ImageSpec<'_>) -> Result<Vec<u8>, ImageError> {
    let mut payload = vec![0u8; ENGINE_IMAGE_BYTES];
    payload[..4].copy_from_slice(&engine.encode().to_le_bytes());
    build_bit_from_payload(&payload, spec)
}

/// Builds a `.bit` around an engine's stored form (what [`payload`] reads
/// back): how an image is rebuilt for another part.
pub fn build_bit_from_payload(payload: &[u8], spec: &ImageSpec<'_>) -> Result<Vec<u8>, ImageError> {
    let device =
        idcode::by_part(spec.part).ok_or_else(|| ImageError::UnknownPart(spec.part.to_owned()))?;
    let mut frames = PAYLOAD_MAGIC.to_vec();
    frames.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frames.extend_from_slice(payload);
    let data = stream::write_stream(device.idcode, &frames, !spec.partial);
    Ok(bitstream::write_bit(
        &design_field(spec),
        spec.part,
        spec.date,
        spec.time,
        &data,
    ))
}

/// A decoded image.
#[derive(Debug)]
pub struct LoadedImage {
    /// The `.bit` header, if the image had one (a staged `.bin` has not).
    pub header: Option<BitHeader>,
    /// What its configuration stream says: the IDCODE above all.
    pub stream: stream::ConfigStream,
    /// The engine the module reports in `SLOT_ENGINE`.
    pub engine: EngineId,
}

/// The engine's stored form in an image's frame data, and what the stream
/// says.
pub fn payload(bytes: &[u8]) -> Result<(stream::ConfigStream, Vec<u8>), ImageError> {
    let config = stream::parse(bytes)?;
    let data = bitstream::natural_data(bytes)?;
    let frames = config
        .frames
        .clone()
        .and_then(|r| data.get(r))
        .ok_or(ImageError::NoFrames)?;
    let body = frames
        .strip_prefix(PAYLOAD_MAGIC.as_slice())
        .ok_or(ImageError::NotAnEngine)?;
    let (len, rest) = body.split_at_checked(4).ok_or(ImageError::NotAnEngine)?;
    let declared = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let stored = rest.get(..declared).ok_or(ImageError::Truncated {
        declared,
        available: rest.len(),
    })?;
    Ok((config, stored.to_vec()))
}

/// Decodes a `.bit` or `.bin` image into its engine.
pub fn load(bytes: &[u8]) -> Result<LoadedImage, ImageError> {
    let info = bitstream::inspect(bytes)?;
    let (stream, stored) = payload(bytes)?;
    let id = stored
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(ImageError::NotAnEngine)?;
    Ok(LoadedImage {
        header: info.header,
        stream,
        engine: EngineId::decode(id).ok_or(ImageError::NotAnEngine)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ImageSpec<'static> {
        ImageSpec {
            design: "fabricd_rm_trigram_v2",
            part: "xck26-sfvc784-2LV-c",
            interface_id: 0x5EED_0001,
            partial: true,
            date: "2026/11/30",
            time: "12:00:00",
        }
    }

    #[test]
    fn an_engine_survives_bit_and_bin() {
        let bit = build_bit(EngineId::TRIGRAM_V2, &spec()).expect("build");
        let loaded = load(&bit).expect("bit");
        let header = loaded.header.expect("header");
        assert!(header.is_partial());
        assert_eq!(header.user_id(), Some(0x5EED_0001));
        assert_eq!(loaded.engine, EngineId::TRIGRAM_V2);
        assert!(
            bit.len() > ENGINE_IMAGE_BYTES,
            "as large as a partition's frames"
        );
        let bin = bitstream::to_bin(&bit).expect("bin");
        let loaded = load(&bin).expect("bin loads");
        assert!(loaded.header.is_none());
        assert_eq!(loaded.stream.idcode, 0x0472_4093, "the K26's IDCODE");
        assert!(!loaded.stream.starts_up, "a partial image has no startup");
    }

    #[test]
    fn a_full_image_starts_up_and_a_part_is_written_as_its_idcode() {
        let spec = ImageSpec {
            part: "xc7z020clg484-1",
            partial: false,
            ..spec()
        };
        let loaded = load(&build_bit(EngineId::TRIGRAM_V2, &spec).expect("build")).expect("load");
        assert_eq!(loaded.stream.idcode, 0x0372_7093);
        assert!(loaded.stream.starts_up);
        let unknown = ImageSpec {
            part: "xc7a35tcpg236-1",
            ..spec
        };
        assert!(matches!(
            build_bit(EngineId::TRIGRAM_V2, &unknown),
            Err(ImageError::UnknownPart(_))
        ));
    }

    #[test]
    fn a_truncated_image_is_refused() {
        let bit = build_bit(EngineId::TRIGRAM_V2, &spec()).expect("build");
        let bin = bitstream::to_bin(&bit).expect("bin");
        // Past the DESYNC and its NOOPs, into the frames.
        let cut = &bin[..bin.len() - 28];
        assert!(matches!(
            load(cut),
            Err(ImageError::Stream(stream::StreamError::Truncated { .. }))
        ));
    }
}
