//! How an error reaches an operator: its message and each cause's, on one
//! line (`reading /sys/x: No such file or directory (os error 2)`).
//!
//! The workspace's rule for its errors (thiserror's and the Rust API
//! guidelines'): a variant's message says its own step and does not include
//! its source, which `source()` returns. Printing the chain, with
//! [`Chain`] or anyhow's `{:#}`, then shows each cause once; a message that
//! also wrote `{source}` would show it twice. So a log line or a refusal
//! that shows a typed error shows `Chain(&e)`, not `e` alone, which would
//! leave out the cause.

use std::error::Error;
use std::fmt;

/// Displays an error and its sources, joined by `": "`, as anyhow's
/// `{:#}` does.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a dyn Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::AttachError;
    use crate::devtree::DtError;
    use crate::sysfs::SysfsError;
    use crate::uio::UioError;

    fn io() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    /// Each level of the attach errors once, the cause once: the messages
    /// must not repeat their sources.
    #[test]
    fn a_chain_names_each_cause_once() {
        let cause = io().to_string();
        let errors: Vec<Box<dyn Error>> = vec![
            Box::new(AttachError::NoRoot {
                root: "/r".into(),
                source: io(),
            }),
            Box::new(AttachError::DeviceTree(DtError::Read {
                path: "/r/proc/device-tree".into(),
                source: io(),
            })),
            Box::new(AttachError::Uio(UioError::NoUioClass {
                path: "/r/sys/class/uio".into(),
                source: io(),
            })),
            Box::new(AttachError::Uio(UioError::Sysfs(SysfsError::Read {
                path: "/r/sys/class/uio/uio0/name".into(),
                source: io(),
            }))),
        ];
        for e in &errors {
            let text = Chain(e.as_ref()).to_string();
            assert_eq!(text.matches(&cause).count(), 1, "{text}");
        }
        let e = &errors[1];
        assert_eq!(
            Chain(e.as_ref()).to_string(),
            format!("no fabric found: reading the device tree at /r/proc/device-tree: {cause}")
        );
    }
}
