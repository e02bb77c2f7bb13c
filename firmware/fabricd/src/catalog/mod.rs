//! The model catalog: `manifest.toml` in the firmware directory, the
//! tokenizers, and the bitstreams.
//!
//! A model is addressed by its name, never by a path: file names in the
//! manifest must be plain names inside the catalog directory, so nothing
//! outside it can be loaded. Every file's SHA-256 is checked before it is
//! used, and every image passes the [`gate`] (its part, kind and shell,
//! from the manifest, its header and its configuration stream, against each
//! other and the board). An image that fails is kept in the catalog with
//! its problem, and so is its model, so operators see why it cannot be
//! loaded; every other model stays usable. A manifest entry that cannot be
//! read as it should (a `kind` other than `partial` or `full`) makes its
//! image unusable, not the whole manifest.
//!
//! # Layout
//! - this file: the manifest, the files' hashes, the models.
//! - [`gate`]: the checks every image passes, here and before a load.

pub mod gate;

pub use gate::{Board, GateError};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fabric_hw::bitstream;
use fabric_model::Tokenizer;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The catalog's manifest file name.
pub const MANIFEST: &str = "manifest.toml";

/// Why the catalog, or one of its models, is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("reading {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Manifest { path: PathBuf, reason: String },
    #[error("{path}: sha256 is {found}, the manifest expects {expected}")]
    Hash {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error("{path}: {reason}")]
    Tokenizer { path: PathBuf, reason: String },
    #[error("no model named {name:?} in the catalog (known: {known})")]
    UnknownModel { name: String, known: String },
    #[error("model {model:?}: the manifest gives no identity (the SHA-256 of its table that a slot reports; `mktable` prints it) and none of its images holds a model to take it from")]
    NoIdentity { model: String },
    #[error(transparent)]
    Gate(#[from] GateError),
}

/// `manifest.toml`, read and checked for shape ([`Manifest::parse`]): its
/// version, its model names, its file names. The files themselves are
/// checked by [`Catalog::load`].
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u32,
    pub shell: ShellRequirement,
    #[serde(default)]
    pub model: Vec<ModelEntry>,
}

/// What the catalog's images need from the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShellRequirement {
    pub major: u16,
    pub interface_id: u32,
}

/// A model as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub tokenizer: String,
    pub tokenizer_sha256: String,
    /// What a slot holding the model reports in SLOT_HASH: the SHA-256 of
    /// its table (contract section 9). A simulator image holds its model,
    /// so the catalog can take it from there when the manifest is silent;
    /// a real bitstream cannot be read back, so its manifest must say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    pub image: Vec<RawImage>,
}

/// An image as the manifest writes it. `kind` is kept as a TOML value
/// here so that a wrong one costs its image, not the whole manifest.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawImage {
    pub file: String,
    pub sha256: String,
    pub part: String,
    pub slots: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<toml::Value>,
}

/// What an image configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    /// A PR slot's module.
    Partial,
    /// The whole device, shell included (for kernels without configfs
    /// overlays, and `fabricctl load --full`).
    Full,
}

impl ImageKind {
    /// `Partial` if `partial`, else `Full`.
    pub fn partial_if(partial: bool) -> ImageKind {
        if partial {
            ImageKind::Partial
        } else {
            ImageKind::Full
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ImageKind::Partial => "partial",
            ImageKind::Full => "full",
        }
    }
}

impl std::fmt::Display for ImageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One bitstream of a model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImageEntry {
    pub file: String,
    pub sha256: String,
    pub part: String,
    pub slots: Vec<u8>,
    /// The manifest's `kind` (`partial` when it says none), or the value it
    /// gave instead of `partial` or `full`, as written.
    #[serde(serialize_with = "kind_as_written")]
    pub kind: Result<ImageKind, String>,
    /// Why the image may not be loaded, if it may not.
    #[serde(serialize_with = "problem_as_text")]
    pub problem: Option<CatalogError>,
}

impl ImageEntry {
    fn from_raw(raw: RawImage) -> ImageEntry {
        let kind = match raw.kind {
            None => Ok(ImageKind::Partial),
            Some(v) => v.clone().try_into::<ImageKind>().map_err(|_| v.to_string()),
        };
        let problem = kind.as_ref().err().map(|value| {
            CatalogError::Gate(GateError::Kind {
                file: raw.file.clone(),
                value: value.clone(),
            })
        });
        ImageEntry {
            file: raw.file,
            sha256: raw.sha256,
            part: raw.part,
            slots: raw.slots,
            kind,
            problem,
        }
    }

    /// Whether it is a usable image of `kind`.
    pub fn is(&self, kind: ImageKind) -> bool {
        self.kind == Ok(kind)
    }
}

fn kind_as_written<S: serde::Serializer>(
    kind: &Result<ImageKind, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match kind {
        Ok(k) => s.serialize_str(k.as_str()),
        Err(v) => s.serialize_str(v),
    }
}

fn problem_as_text<S: serde::Serializer>(
    problem: &Option<CatalogError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match problem {
        Some(p) => s.serialize_str(&p.to_string()),
        None => s.serialize_none(),
    }
}

/// A model of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogModel {
    pub name: Arc<str>,
    pub description: String,
    pub images: Vec<ImageEntry>,
    /// The tokenizer, when its file checked out.
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// What a slot holding the model reports in SLOT_HASH.
    pub identity: Option<String>,
    /// SHA-256s a shell may report for this model: its identity, and for
    /// shells of contract 1.0 each image's file and its byte-swapped `.bin`
    /// form.
    pub hashes: Vec<String>,
    /// Why the model cannot be used, if it cannot.
    pub problem: Option<CatalogError>,
}

/// The catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub dir: PathBuf,
    pub shell: ShellRequirement,
    pub models: Vec<CatalogModel>,
}

/// Whether `name` is a plain file name (no directories, no `..`).
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

/// Whether `name` is a valid model name: letters, digits, `-`, `_`, `.`,
/// starting with a letter or digit.
pub fn valid_model_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.contains("..")
        && name.len() <= 64
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    fabric_hw::shell::hex(&Sha256::digest(bytes))
}

impl Manifest {
    /// Parses a manifest's text (read from `path`, which errors name) and
    /// checks its shape: version 1, every model name valid and listed once,
    /// every file a plain name inside the catalog, every model with an
    /// image. Opens no file.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, CatalogError> {
        let bad = |reason: String| CatalogError::Manifest {
            path: path.to_owned(),
            reason,
        };
        let manifest: Manifest = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if manifest.version != 1 {
            return Err(bad(format!(
                "version {} (this daemon reads version 1)",
                manifest.version
            )));
        }
        let mut seen = BTreeMap::new();
        for entry in &manifest.model {
            if !valid_model_name(&entry.name) {
                return Err(bad(format!(
                    "model name {:?} is not a plain name (letters, digits, -, _, .)",
                    entry.name
                )));
            }
            if seen.insert(entry.name.clone(), ()).is_some() {
                return Err(bad(format!("model {:?} is listed twice", entry.name)));
            }
            for file in std::iter::once(&entry.tokenizer).chain(entry.image.iter().map(|i| &i.file))
            {
                if !plain_name(file) {
                    return Err(bad(format!(
                        "model {:?}: file {file:?} is not a plain name inside the catalog",
                        entry.name
                    )));
                }
            }
            if entry.image.is_empty() {
                return Err(bad(format!("model {:?} has no image", entry.name)));
            }
        }
        Ok(manifest)
    }
}

impl Catalog {
    /// Reads `dir/manifest.toml` and checks every file it names, the
    /// images against `board` when it is known.
    pub fn load(dir: &Path, board: Option<&Board>) -> Result<Catalog, CatalogError> {
        let path = dir.join(MANIFEST);
        let text = fs::read_to_string(&path).map_err(|e| CatalogError::Read {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let manifest = Manifest::parse(&text, &path)?;
        let models = manifest
            .model
            .into_iter()
            .map(|entry| Self::check_model(dir, entry, &manifest.shell, board))
            .collect();
        Ok(Catalog {
            dir: dir.to_owned(),
            shell: manifest.shell,
            models,
        })
    }

    fn check_model(
        dir: &Path,
        entry: ModelEntry,
        shell: &ShellRequirement,
        board: Option<&Board>,
    ) -> CatalogModel {
        let mut model = CatalogModel {
            name: Arc::from(entry.name.as_str()),
            description: entry.description.clone(),
            images: Vec::new(),
            tokenizer: None,
            identity: entry
                .identity
                .clone()
                .map(|i| i.trim().to_ascii_lowercase()),
            hashes: Vec::new(),
            problem: None,
        };
        let tok_path = dir.join(&entry.tokenizer);
        match read_checked(&tok_path, &entry.tokenizer_sha256) {
            Ok(bytes) => match Tokenizer::from_bytes(&bytes) {
                Ok(t) => model.tokenizer = Some(Arc::new(t)),
                Err(e) => {
                    model.problem = Some(CatalogError::Tokenizer {
                        path: tok_path,
                        reason: e.to_string(),
                    })
                }
            },
            Err(e) => model.problem = Some(e),
        }
        // The shell the images must be built for: the running one's, or
        // off the board the one the manifest names.
        let interface_id = board.map_or(shell.interface_id, |b| b.interface_id);
        for raw in entry.image {
            let mut image = ImageEntry::from_raw(raw);
            let path = dir.join(&image.file);
            match read_checked(&path, &image.sha256) {
                Ok(bytes) => {
                    if model.identity.is_none() {
                        model.identity = identity_of(&bytes);
                    }
                    model.hashes.push(image.sha256.clone());
                    if let Ok(bin) = bitstream::to_bin(&bytes) {
                        model.hashes.push(sha256_hex(&bin));
                    }
                    if image.problem.is_none() {
                        let part = board.map(|b| b.part.as_str());
                        if let Err(e) = gate::check(&image, &bytes, interface_id, part) {
                            image.problem = Some(e.into());
                        }
                    }
                }
                Err(e) => image.problem = image.problem.or(Some(e)),
            }
            if let Some(p) = &image.problem {
                log::warn!(
                    "catalog: model {}: image {} is unusable: {p}",
                    model.name,
                    image.file
                );
                // One unusable image makes its model unusable, as a bad
                // hash always did: a model is loaded by name, and which of
                // its images a load takes depends on the slot and the
                // kernel, not on the operator.
                if model.problem.is_none() {
                    model.problem = Some(p.clone());
                }
            }
            model.images.push(image);
        }
        match &model.identity {
            Some(id) => model.hashes.push(id.clone()),
            None if model.problem.is_none() => {
                model.problem = Some(CatalogError::NoIdentity {
                    model: model.name.to_string(),
                })
            }
            None => {}
        }
        if let Some(p) = &model.problem {
            log::warn!("catalog: model {} is unusable: {p}", model.name);
        }
        model
    }

    /// The model named `name`.
    pub fn get(&self, name: &str) -> Result<&CatalogModel, CatalogError> {
        self.models
            .iter()
            .find(|m| &*m.name == name)
            .ok_or_else(|| CatalogError::UnknownModel {
                name: name.to_owned(),
                known: self
                    .models
                    .iter()
                    .map(|m| &*m.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The model whose image has SHA-256 `hash` (as a shell reports it).
    pub fn by_hash(&self, hash: &str) -> Option<&CatalogModel> {
        self.models
            .iter()
            .find(|m| m.hashes.iter().any(|h| h == hash))
    }
}

/// The identity of the model a simulator image holds, if it holds one.
fn identity_of(image: &[u8]) -> Option<String> {
    let model = fabric_model::image::load(image).ok()?.model;
    let table = fabric_model::table::Table::build(&model).ok()?;
    Some(
        table
            .identity()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Reads a file and checks its SHA-256 against the manifest.
pub fn read_checked(path: &Path, expected: &str) -> Result<Vec<u8>, CatalogError> {
    let bytes = fs::read(path).map_err(|e| CatalogError::Read {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let found = sha256_hex(&bytes);
    if !found.eq_ignore_ascii_case(expected.trim()) {
        return Err(CatalogError::Hash {
            path: path.to_owned(),
            expected: expected.to_owned(),
            found,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_bitstreams() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bitstreams")
    }

    #[test]
    fn the_shipped_catalog_checks_out() {
        let cat = Catalog::load(&repo_bitstreams(), None).expect("catalog");
        assert!(cat.models.len() >= 2);
        for m in &cat.models {
            assert!(m.problem.is_none(), "{}: {:?}", m.name, m.problem);
            // Each image's file and .bin form, and the identity.
            assert_eq!(m.hashes.len(), 2 * m.images.len() + 1);
            // The manifest's identity is the table's of the model inside.
            let bytes = fs::read(repo_bitstreams().join(&m.images[0].file)).expect("image");
            assert_eq!(m.identity, identity_of(&bytes), "{}", m.name);
        }
        assert!(cat.by_hash(&cat.models[0].images[0].sha256).is_some());
        let id = cat.models[0].identity.clone().expect("an identity");
        assert_eq!(
            cat.by_hash(&id).map(|m| m.name.clone()),
            Some(cat.models[0].name.clone())
        );
        let err = cat.get("nope").expect_err("unknown");
        assert!(err.to_string().contains("kjv"), "{err}");
    }

    #[test]
    fn a_tampered_image_is_named_and_the_rest_still_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_catalog(dir.path());
        let mut bit = fs::read(dir.path().join("kjv.bit")).expect("read");
        let last = bit.len() - 1;
        bit[last] ^= 0xff;
        fs::write(dir.path().join("kjv.bit"), bit).expect("write");
        let cat = Catalog::load(dir.path(), None).expect("catalog");
        let kjv = cat.get("kjv").expect("kjv");
        let text = kjv.problem.as_ref().expect("problem").to_string();
        assert!(
            text.contains("kjv.bit") && text.contains("manifest expects"),
            "{text}"
        );
        assert!(cat.get("fortunes").expect("fortunes").problem.is_none());
    }

    fn copy_catalog(dir: &Path) {
        for entry in fs::read_dir(repo_bitstreams()).expect("read") {
            let entry = entry.expect("entry");
            fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        }
    }

    #[test]
    fn an_identity_left_out_is_taken_from_the_model_in_the_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_catalog(dir.path());
        let shipped = Catalog::load(dir.path(), None).expect("catalog");
        let path = dir.path().join(MANIFEST);
        let text = fs::read_to_string(&path).expect("read");
        let without: String = text
            .lines()
            .filter(|l| !l.starts_with("identity"))
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(&path, without).expect("write");
        let cat = Catalog::load(dir.path(), None).expect("catalog");
        for (m, s) in cat.models.iter().zip(&shipped.models) {
            assert!(m.problem.is_none(), "{:?}", m.problem);
            assert_eq!(m.identity, s.identity);
        }
    }

    #[test]
    fn a_model_with_no_identity_to_be_had_is_unusable_and_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_catalog(dir.path());
        let path = dir.path().join(MANIFEST);
        let text = fs::read_to_string(&path).expect("read");
        // A real bitstream holds no model the catalog could read: here,
        // images whose frame data is not a model (the gate does not look).
        let mut text: String = text
            .lines()
            .filter(|l| !l.starts_with("identity"))
            .map(|l| format!("{l}\n"))
            .collect();
        for file in ["kjv.bit", "kjv-full.bit"] {
            let mut bit = fs::read(dir.path().join(file)).expect("read");
            let old = sha256_hex(&bit);
            let at = bit
                .windows(8)
                .position(|w| w == b"FBRMODL1")
                .expect("the model's frames");
            bit[at] = b'X';
            fs::write(dir.path().join(file), &bit).expect("write");
            text = text.replace(&old, &sha256_hex(&bit));
        }
        fs::write(&path, text).expect("write");
        let cat = Catalog::load(dir.path(), None).expect("catalog");
        let kjv = cat.get("kjv").expect("kjv");
        let problem = kjv.problem.as_ref().expect("unusable").to_string();
        assert!(
            problem.contains("no identity") && problem.contains("mktable"),
            "{problem}"
        );
    }

    #[test]
    fn a_manifest_parses_without_its_files_and_writes_back() {
        let path = repo_bitstreams().join(MANIFEST);
        let text = fs::read_to_string(&path).expect("read");
        let m = Manifest::parse(&text, &path).expect("the shipped manifest");
        assert_eq!(m.model.len(), 2);
        let again = toml::to_string(&m).expect("toml");
        assert_eq!(Manifest::parse(&again, &path), Ok(m));
        let err = Manifest::parse("version = 2\n[shell]\nmajor = 1\ninterface_id = 1\n", &path)
            .expect_err("version 2");
        assert!(err.to_string().contains("version 2"), "{err}");
    }

    #[test]
    fn paths_in_the_manifest_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = r#"
version = 1
[shell]
major = 1
interface_id = 1
[[model]]
name = "evil"
tokenizer = "../../etc/passwd"
tokenizer_sha256 = "00"
[[model.image]]
file = "x.bit"
sha256 = "00"
part = "p"
slots = [0]
"#;
        fs::write(dir.path().join(MANIFEST), manifest).expect("write");
        let err = Catalog::load(dir.path(), None).expect_err("refused");
        assert!(err.to_string().contains("not a plain name"), "{err}");
        assert!(!valid_model_name("../kjv"));
        assert!(!valid_model_name("kjv/../x"));
        assert!(valid_model_name("kjv-2.1_b"));
    }
}
