//! Attribute files: sysfs, configfs and the live device tree.
//!
//! Every error names the file and what was expected, so "error: 1" never
//! reaches an operator.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Why an attribute could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("reading {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: expected {expected}, found {found:?}")]
    Parse {
        path: PathBuf,
        expected: &'static str,
        found: String,
    },
    #[error("writing {value:?} to {path}")]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
}

/// The attribute's text, without the trailing newline.
pub fn read_string(path: &Path) -> Result<String, SysfsError> {
    let raw = fs::read(path).map_err(|source| SysfsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8(raw).map_err(|e| SysfsError::Parse {
        path: path.to_owned(),
        expected: "UTF-8 text",
        found: String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })?;
    Ok(text.trim_end_matches(['\n', '\0']).trim().to_owned())
}

/// A number in C notation: `0x` hexadecimal or decimal, as the kernel prints
/// addresses and sizes.
pub fn read_u64(path: &Path) -> Result<u64, SysfsError> {
    let text = read_string(path)?;
    parse_u64(&text).ok_or_else(|| SysfsError::Parse {
        path: path.to_owned(),
        expected: "a number (decimal or 0x hexadecimal)",
        found: text,
    })
}

/// Parses `0x…` as hexadecimal and anything else as decimal.
pub fn parse_u64(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() => u64::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None => text.parse().ok(),
    }
}

/// Writes `value` to the attribute in one `write()`, as sysfs expects.
pub fn write(path: &Path, value: &str) -> Result<(), SysfsError> {
    fs::write(path, value).map_err(|source| SysfsError::Write {
        path: path.to_owned(),
        value: value.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_both_notations() {
        assert_eq!(parse_u64("0x1f300000"), Some(0x1f30_0000));
        assert_eq!(parse_u64("8388608\n"), Some(8_388_608));
        assert_eq!(parse_u64("0x"), None);
        assert_eq!(parse_u64("twelve"), None);
        assert_eq!(parse_u64("-1"), None);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("size");
        fs::write(&path, "lots\n").expect("write");
        let err = read_u64(&path).expect_err("not a number");
        let text = err.to_string();
        assert!(text.contains("size"), "{text}");
        assert!(text.contains("lots"), "{text}");
        let err = read_u64(&dir.path().join("missing")).expect_err("missing");
        assert!(err.to_string().contains("missing"));
    }
}
