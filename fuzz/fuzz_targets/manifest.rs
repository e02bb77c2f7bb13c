//! The catalog's manifest (`manifest.toml`): `fabricd::catalog::Manifest::parse`,
//! everything `Catalog::load` checks before it opens a file the manifest
//! names.
//!
//! Beyond not panicking: a manifest that parses is version 2, names each
//! engine and model once with a valid name, gives every engine an image,
//! names only plain files, and written back as TOML parses to the same
//! manifest; a refusal names the file.
#![no_main]

use std::collections::BTreeSet;
use std::path::Path;

use fabricd::catalog::{plain_name, valid_model_name, Manifest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // `Catalog::load` reads the file as UTF-8 first.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let path = Path::new("manifest.toml");
    let manifest = match Manifest::parse(text, path) {
        Ok(m) => m,
        Err(e) => {
            assert!(e.to_string().starts_with("manifest.toml: "), "{e}");
            return;
        }
    };
    assert_eq!(manifest.version, 2);
    let mut names = BTreeSet::new();
    for e in &manifest.engine {
        assert!(valid_model_name(&e.name) && names.insert(("engine", &e.name)));
        assert!(!e.image.is_empty());
        assert!(e.image.iter().all(|i| plain_name(&i.file)));
    }
    for m in &manifest.model {
        assert!(valid_model_name(&m.name) && names.insert(("model", &m.name)));
        assert!(plain_name(&m.tokenizer) && plain_name(&m.table));
    }
    let again = toml::to_string(&manifest).expect("a manifest writes as TOML");
    let back = Manifest::parse(&again, path).unwrap_or_else(|e| panic!("{again}: {e}"));
    assert_eq!(back, manifest);
});
