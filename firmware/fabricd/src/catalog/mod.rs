//! The model catalog: `manifest.toml` in the firmware directory, the
//! engines' bitstreams, the models' tables and the tokenizers.
//!
//! Contract 2.0: a partial bitstream carries an engine, not a model. An
//! engine (`[[engine]]`: its kind and version as `SLOT_ENGINE` reports
//! them, and its images) runs any model made for it; a model (`[[model]]`)
//! names its engine and is a table the daemon commits from DDR, with the
//! identity the table declares and the CRC-32 the engine computes reading
//! it. Loading a model into a slot whose engine runs it is a table commit;
//! otherwise the engine's image goes in first.
//!
//! A model or an engine is addressed by its name, never by a path: file
//! names in the manifest must be plain names inside the catalog directory,
//! so nothing outside it can be loaded. Every file's SHA-256 is checked
//! before it is used, every image passes the [`gate`] (its part, kind and
//! shell, from the manifest, its header and its configuration stream,
//! against each other and the board), and every table is checked as the
//! engine would check it (its magic, its engine, its length) and against the
//! manifest (its identity, its CRC). Whatever fails is kept in the catalog
//! with its problem, so operators see why a model cannot be loaded; every
//! other model stays usable. A manifest entry that cannot be read as it
//! should (a `kind` other than `partial` or `full`) makes its image
//! unusable, not the whole manifest.
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

use fabric_hw::contract::EngineId;
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
    #[error("model {model:?} runs on engine {engine:?}, which the catalog does not have (engines: {known})")]
    UnknownEngine {
        model: String,
        engine: String,
        known: String,
    },
    #[error("model {model:?}: its engine {engine:?} is unusable: {problem}")]
    EngineUnusable {
        model: String,
        engine: String,
        problem: Box<CatalogError>,
    },
    #[error("{path}: {problem}")]
    Table { path: PathBuf, problem: String },
    #[error(transparent)]
    Gate(#[from] GateError),
}

/// `manifest.toml`, read and checked for shape ([`Manifest::parse`]): its
/// version, its names, its file names. The files themselves are checked by
/// [`Catalog::load`].
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u32,
    pub shell: ShellRequirement,
    #[serde(default)]
    pub engine: Vec<EngineEntry>,
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

/// An engine as the manifest lists it: what `SLOT_ENGINE` reports for it,
/// and its bitstreams.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EngineEntry {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub kind: u16,
    pub version: u16,
    pub image: Vec<RawImage>,
}

/// A model as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The engine it runs on (an `[[engine]]`'s name).
    pub engine: String,
    /// Its table (contract section 9), as the daemon commits it.
    pub table: String,
    pub table_sha256: String,
    /// The CRC-32 its engine computes reading the table in
    /// (`SLOT_TABLE_CRC`; `mktable` prints it).
    pub table_crc: u32,
    /// The identity the table declares (`SLOT_IDENTITY`; `mktable` prints
    /// it).
    pub identity: String,
    pub tokenizer: String,
    pub tokenizer_sha256: String,
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

/// An engine of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogEngine {
    pub name: Arc<str>,
    pub description: String,
    pub id: EngineId,
    pub images: Vec<ImageEntry>,
    /// Why the engine cannot be loaded, if it cannot.
    pub problem: Option<CatalogError>,
}

/// A model's table, as the manifest describes it and the file checked out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableEntry {
    pub file: String,
    pub sha256: String,
    /// The CRC-32 its engine computes reading it in.
    pub crc: u32,
    /// Its length in bytes.
    pub bytes: u64,
}

/// A model of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogModel {
    pub name: Arc<str>,
    pub description: String,
    /// The engine it runs on: its name, and what `SLOT_ENGINE` reports.
    pub engine_name: Arc<str>,
    pub engine: EngineId,
    /// Its engine's images (a slot without the engine is loaded with one).
    pub images: Vec<ImageEntry>,
    pub table: TableEntry,
    /// The tokenizer, when its file checked out.
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// What a slot holding the model reports in SLOT_IDENTITY: the identity
    /// its table declares.
    pub identity: Option<String>,
    /// The most positions a sequence holds, its prompt and output together:
    /// a transformer's context (contract section 10); `None` for a trigram
    /// table, which keeps only the last two tokens.
    pub context: Option<u32>,
    /// Why the model cannot be used, if it cannot.
    pub problem: Option<CatalogError>,
}

/// The catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub dir: PathBuf,
    pub shell: ShellRequirement,
    pub engines: Vec<CatalogEngine>,
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
    /// checks its shape: version 2, every engine and model name valid and
    /// listed once, every file a plain name inside the catalog, every engine
    /// with an image. Opens no file.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, CatalogError> {
        let bad = |reason: String| CatalogError::Manifest {
            path: path.to_owned(),
            reason,
        };
        let manifest: Manifest = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if manifest.version != 2 {
            return Err(bad(format!(
                "version {} (this daemon reads version 2: engines, and models as tables)",
                manifest.version
            )));
        }
        let mut seen = BTreeMap::new();
        for entry in &manifest.engine {
            if !valid_model_name(&entry.name) {
                return Err(bad(format!(
                    "engine name {:?} is not a plain name (letters, digits, -, _, .)",
                    entry.name
                )));
            }
            if seen.insert(("engine", entry.name.clone()), ()).is_some() {
                return Err(bad(format!("engine {:?} is listed twice", entry.name)));
            }
            if entry.image.is_empty() {
                return Err(bad(format!("engine {:?} has no image", entry.name)));
            }
            for file in entry.image.iter().map(|i| &i.file) {
                if !plain_name(file) {
                    return Err(bad(format!(
                        "engine {:?}: file {file:?} is not a plain name inside the catalog",
                        entry.name
                    )));
                }
            }
        }
        for entry in &manifest.model {
            if !valid_model_name(&entry.name) {
                return Err(bad(format!(
                    "model name {:?} is not a plain name (letters, digits, -, _, .)",
                    entry.name
                )));
            }
            if seen.insert(("model", entry.name.clone()), ()).is_some() {
                return Err(bad(format!("model {:?} is listed twice", entry.name)));
            }
            for file in [&entry.tokenizer, &entry.table] {
                if !plain_name(file) {
                    return Err(bad(format!(
                        "model {:?}: file {file:?} is not a plain name inside the catalog",
                        entry.name
                    )));
                }
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
        let engines: Vec<CatalogEngine> = manifest
            .engine
            .into_iter()
            .map(|entry| Self::check_engine(dir, entry, &manifest.shell, board))
            .collect();
        let models = manifest
            .model
            .into_iter()
            .map(|entry| Self::check_model(dir, entry, &engines))
            .collect();
        Ok(Catalog {
            dir: dir.to_owned(),
            shell: manifest.shell,
            engines,
            models,
        })
    }

    fn check_engine(
        dir: &Path,
        entry: EngineEntry,
        shell: &ShellRequirement,
        board: Option<&Board>,
    ) -> CatalogEngine {
        let mut engine = CatalogEngine {
            name: Arc::from(entry.name.as_str()),
            description: entry.description,
            id: EngineId {
                kind: entry.kind,
                version: entry.version,
            },
            images: Vec::new(),
            problem: None,
        };
        // The shell the images must be built for: the running one's, or
        // off the board the one the manifest names.
        let interface_id = board.map_or(shell.interface_id, |b| b.interface_id);
        for raw in entry.image {
            let mut image = ImageEntry::from_raw(raw);
            let path = dir.join(&image.file);
            match read_checked(&path, &image.sha256) {
                Ok(bytes) => {
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
                    "catalog: engine {}: image {} is unusable: {p}",
                    engine.name,
                    image.file
                );
                // One unusable image makes its engine unusable: which of
                // its images a load takes depends on the slot and the
                // kernel, not on the operator.
                if engine.problem.is_none() {
                    engine.problem = Some(p.clone());
                }
            }
            engine.images.push(image);
        }
        engine
    }

    fn check_model(dir: &Path, entry: ModelEntry, engines: &[CatalogEngine]) -> CatalogModel {
        let engine = engines.iter().find(|e| *e.name == entry.engine);
        let mut model = CatalogModel {
            name: Arc::from(entry.name.as_str()),
            description: entry.description.clone(),
            engine_name: Arc::from(entry.engine.as_str()),
            engine: engine.map_or(
                EngineId {
                    kind: 0,
                    version: 0,
                },
                |e| e.id,
            ),
            images: engine.map(|e| e.images.clone()).unwrap_or_default(),
            table: TableEntry {
                file: entry.table.clone(),
                sha256: entry.table_sha256.clone(),
                crc: entry.table_crc,
                bytes: 0,
            },
            tokenizer: None,
            identity: Some(entry.identity.trim().to_ascii_lowercase()),
            context: None,
            problem: None,
        };
        let mut problem = |p: CatalogError| {
            if model.problem.is_none() {
                model.problem = Some(p);
            }
        };
        match engine {
            None => problem(CatalogError::UnknownEngine {
                model: entry.name.clone(),
                engine: entry.engine.clone(),
                known: engines
                    .iter()
                    .map(|e| &*e.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            Some(e) => {
                if let Some(p) = &e.problem {
                    problem(CatalogError::EngineUnusable {
                        model: entry.name.clone(),
                        engine: entry.engine.clone(),
                        problem: Box::new(p.clone()),
                    });
                }
            }
        }
        let tok_path = dir.join(&entry.tokenizer);
        match read_checked(&tok_path, &entry.tokenizer_sha256) {
            Ok(bytes) => match Tokenizer::from_bytes(&bytes) {
                Ok(t) => model.tokenizer = Some(Arc::new(t)),
                Err(e) => problem(CatalogError::Tokenizer {
                    path: tok_path,
                    reason: e.to_string(),
                }),
            },
            Err(e) => problem(e),
        }
        let table_path = dir.join(&entry.table);
        match read_table(&table_path, &entry) {
            Ok(table) => {
                model.table.bytes = table.words as u64 * 4;
                model.context = table.context.map(|c| c as u32);
            }
            Err(e) => problem(e),
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

    /// The model whose table declares `identity` (as a slot reports it in
    /// SLOT_IDENTITY).
    pub fn by_identity(&self, identity: &str) -> Option<&CatalogModel> {
        self.models
            .iter()
            .find(|m| m.identity.as_deref() == Some(identity))
    }

    /// The engine a slot reports, by the catalog's name for it.
    pub fn engine(&self, id: EngineId) -> Option<&CatalogEngine> {
        self.engines.iter().find(|e| e.id == id)
    }
}

/// Reads a model's table, checks its SHA-256 against the manifest, the
/// table as its engine would (magic, engine, length), and the identity it
/// declares and the CRC it has against the manifest's.
fn read_table(
    path: &Path,
    entry: &ModelEntry,
) -> Result<fabric_model::committed::Committed, CatalogError> {
    let bytes = read_checked(path, &entry.table_sha256)?;
    let bad = |problem: String| CatalogError::Table {
        path: path.to_owned(),
        problem,
    };
    let table = fabric_model::committed::read(&bytes).map_err(|e| bad(e.to_string()))?;
    let declared = fabric_hw::shell::hex(&table.declared_identity);
    if !declared.eq_ignore_ascii_case(entry.identity.trim()) {
        return Err(bad(format!(
            "it declares identity {declared}, the manifest says {}",
            entry.identity.trim()
        )));
    }
    let crc = table.crc;
    if crc != entry.table_crc {
        return Err(bad(format!(
            "its CRC-32 is {crc:#010x}, the manifest says {:#010x}",
            entry.table_crc
        )));
    }
    Ok(table)
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
        // Every image passed the gate against the manifest's shell, so
        // this ties them to the boundary rtl/ builds too.
        assert_eq!(
            cat.shell.interface_id,
            fabric_hw::contract::SHELL_INTERFACE_ID
        );
        let engines: Vec<EngineId> = cat.engines.iter().map(|e| e.id).collect();
        assert_eq!(engines, [EngineId::TRIGRAM_V2, EngineId::TRANSFORMER_V1]);
        for e in &cat.engines {
            assert!(e.problem.is_none(), "{}: {:?}", e.name, e.problem);
        }
        let models: Vec<(&str, EngineId)> =
            cat.models.iter().map(|m| (&*m.name, m.engine)).collect();
        assert_eq!(
            models,
            [
                ("kjv", EngineId::TRIGRAM_V2),
                ("fortunes", EngineId::TRIGRAM_V2),
                ("kjv-lm", EngineId::TRANSFORMER_V1)
            ]
        );
        for m in &cat.models {
            assert!(m.problem.is_none(), "{}: {:?}", m.name, m.problem);
            let engine = cat.engine(m.engine).expect("its engine");
            assert_eq!(m.images, engine.images, "its engine's images");
            assert!(m.table.bytes > 0);
            // Only a transformer holds a sequence: its weights say how long.
            let context = (m.engine == EngineId::TRANSFORMER_V1).then_some(256);
            assert_eq!(m.context, context, "{}", m.name);
            let id = m.identity.clone().expect("an identity");
            assert_eq!(
                cat.by_identity(&id).map(|x| x.name.clone()),
                Some(m.name.clone())
            );
        }
        assert!(cat.engine(EngineId::TRIGRAM_V2).is_some());
        let err = cat.get("nope").expect_err("unknown");
        assert!(err.to_string().contains("kjv"), "{err}");
    }

    fn copy_catalog(dir: &Path) {
        for entry in fs::read_dir(repo_bitstreams()).expect("read") {
            let entry = entry.expect("entry");
            fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        }
    }

    #[test]
    fn a_tampered_table_is_named_and_the_rest_still_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_catalog(dir.path());
        let mut table = fs::read(dir.path().join("kjv.ftb")).expect("read");
        let last = table.len() - 1;
        table[last] ^= 0xff;
        fs::write(dir.path().join("kjv.ftb"), table).expect("write");
        let cat = Catalog::load(dir.path(), None).expect("catalog");
        let kjv = cat.get("kjv").expect("kjv");
        let text = kjv.problem.as_ref().expect("problem").to_string();
        assert!(
            text.contains("kjv.ftb") && text.contains("manifest expects"),
            "{text}"
        );
        assert!(cat.get("fortunes").expect("fortunes").problem.is_none());
    }

    /// The catalog in `dir` with the manifest's text changed by `edit`.
    fn edited(dir: &Path, edit: impl Fn(&str) -> String) -> Catalog {
        copy_catalog(dir);
        let path = dir.join(MANIFEST);
        let text = fs::read_to_string(&path).expect("read");
        fs::write(&path, edit(&text)).expect("write");
        Catalog::load(dir, None).expect("catalog")
    }

    #[test]
    fn a_table_whose_crc_or_identity_is_not_the_manifests_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The first model's CRC with its lowest bit flipped.
        let cat = edited(dir.path(), |t| {
            let at = t.find("table_crc = 0x").expect("a table_crc") + "table_crc = 0x".len();
            let end = at + t[at..].find('\n').expect("its line's end");
            let crc = u32::from_str_radix(&t[at..end], 16).expect("hex");
            format!("{}{:08x}{}", &t[..at], crc ^ 1, &t[end..])
        });
        let problem = cat.models[0]
            .problem
            .as_ref()
            .expect("unusable")
            .to_string();
        assert!(problem.contains("CRC-32"), "{problem}");
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = edited(dir.path(), |t| {
            t.replacen("identity = \"", "identity = \"00", 1)
        });
        let problem = cat.models[0]
            .problem
            .as_ref()
            .expect("unusable")
            .to_string();
        assert!(problem.contains("declares identity"), "{problem}");
    }

    #[test]
    fn a_model_for_an_engine_the_catalog_lacks_is_unusable_and_says_which() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cat = edited(dir.path(), |t| {
            t.replacen(
                "engine = \"trigram-v2\"\ntable",
                "engine = \"llama\"\ntable",
                1,
            )
        });
        let problem = cat.models[0]
            .problem
            .as_ref()
            .expect("unusable")
            .to_string();
        assert!(
            problem.contains("\"llama\"") && problem.contains("trigram-v2"),
            "{problem}"
        );
        assert!(cat.models[1].problem.is_none());
    }

    #[test]
    fn a_manifest_parses_without_its_files_and_writes_back() {
        let path = repo_bitstreams().join(MANIFEST);
        let text = fs::read_to_string(&path).expect("read");
        let m = Manifest::parse(&text, &path).expect("the shipped manifest");
        assert_eq!(m.model.len(), 3);
        assert_eq!(m.engine.len(), 2);
        let again = toml::to_string(&m).expect("toml");
        assert_eq!(Manifest::parse(&again, &path), Ok(m));
        let err = Manifest::parse("version = 1\n[shell]\nmajor = 1\ninterface_id = 1\n", &path)
            .expect_err("version 1");
        assert!(err.to_string().contains("version 1"), "{err}");
    }

    #[test]
    fn paths_in_the_manifest_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = r#"
version = 2
[shell]
major = 2
interface_id = 1
[[engine]]
name = "e"
kind = 1
version = 2
[[engine.image]]
file = "e.bit"
sha256 = "00"
part = "p"
slots = [0]
[[model]]
name = "evil"
engine = "e"
table = "../../etc/passwd"
table_sha256 = "00"
table_crc = 0
identity = "00"
tokenizer = "t.tok"
tokenizer_sha256 = "00"
"#;
        fs::write(dir.path().join(MANIFEST), manifest).expect("write");
        let err = Catalog::load(dir.path(), None).expect_err("refused");
        assert!(err.to_string().contains("not a plain name"), "{err}");
        assert!(!valid_model_name("../kjv"));
        assert!(!valid_model_name("kjv/../x"));
        assert!(valid_model_name("kjv-2.1_b"));
    }
}
