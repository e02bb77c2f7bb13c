//! A model as a Xilinx bitstream.
//!
//! The configuration data of the `.bit` is what Vivado would write up to the
//! sync word, followed by the model: `FBRMODL1`, a little-endian u32 length,
//! the model's stored form, and padding to a whole word. The simulated
//! fabric finds the sync word in the image it is given (natural or
//! byte-swapped) and decodes what follows.

use fabric_hw::bitstream::{self, BitHeader, BitstreamError};

use crate::ngram::{Model, ModelError};

const PAYLOAD_MAGIC: &[u8; 8] = b"FBRMODL1";
/// The Vivado version our images claim, in the design field.
pub const TOOL_VERSION: &str = "2024.2";

/// Why an image could not be read as a model.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Bitstream(#[from] BitstreamError),
    #[error("the configuration data after the sync word does not hold a fabricd model")]
    NotAModel,
    #[error("the model payload claims {declared} bytes, the image has {available}")]
    Truncated { declared: usize, available: usize },
    #[error(transparent)]
    Model(#[from] ModelError),
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

/// Builds the `.bit` of a model.
pub fn build_bit(model: &Model, spec: &ImageSpec<'_>) -> Vec<u8> {
    let payload = model.to_bytes();
    let mut data = bitstream::config_preamble();
    data.extend_from_slice(PAYLOAD_MAGIC);
    data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    data.extend_from_slice(&payload);
    while !data.len().is_multiple_of(4) {
        data.push(0);
    }
    bitstream::write_bit(&design_field(spec), spec.part, spec.date, spec.time, &data)
}

/// A decoded image.
#[derive(Debug)]
pub struct LoadedImage {
    /// The `.bit` header, if the image had one (a staged `.bin` has not).
    pub header: Option<BitHeader>,
    pub model: Model,
}

/// Decodes a `.bit` or `.bin` image into its model.
pub fn load(bytes: &[u8]) -> Result<LoadedImage, ImageError> {
    let info = bitstream::inspect(bytes)?;
    let data = bitstream::natural_data(bytes)?;
    let after = &data[info.sync_offset + 4..];
    let body = after
        .strip_prefix(PAYLOAD_MAGIC.as_slice())
        .ok_or(ImageError::NotAModel)?;
    if body.len() < 4 {
        return Err(ImageError::NotAModel);
    }
    let declared = u32::from_le_bytes([body[0], body[1], body[2], body[3]]) as usize;
    let payload = &body[4..];
    if payload.len() < declared {
        return Err(ImageError::Truncated {
            declared,
            available: payload.len(),
        });
    }
    Ok(LoadedImage {
        header: info.header,
        model: Model::from_bytes(&payload[..declared])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ngram::Pruning;

    fn model() -> Model {
        Model::train(
            "t",
            400,
            &[vec![300, 301, 302], vec![300, 301, 303]],
            Pruning::default(),
        )
    }

    fn spec() -> ImageSpec<'static> {
        ImageSpec {
            design: "fabricd_rm_t",
            part: "xck26-sfvc784-2LV-c",
            interface_id: 0x5EED_0001,
            partial: true,
            date: "2026/11/30",
            time: "12:00:00",
        }
    }

    #[test]
    fn a_model_survives_bit_and_bin() {
        let m = model();
        let bit = build_bit(&m, &spec());
        let loaded = load(&bit).expect("bit");
        let header = loaded.header.expect("header");
        assert!(header.is_partial());
        assert_eq!(header.user_id(), Some(0x5EED_0001));
        assert_eq!(
            loaded.model.generate(&[300], 3, 0.0, 1, 256),
            m.generate(&[300], 3, 0.0, 1, 256)
        );
        let bin = bitstream::to_bin(&bit).expect("bin");
        let loaded = load(&bin).expect("bin loads");
        assert!(loaded.header.is_none());
    }

    #[test]
    fn a_truncated_image_is_refused() {
        let bit = build_bit(&model(), &spec());
        let bin = bitstream::to_bin(&bit).expect("bin");
        let cut = &bin[..bin.len() - 8];
        assert!(load(cut).is_err());
    }
}
