//! Mixed profiles: weighted request classes that share a rung.
//!
//! A TOML file of classes, each with its share of the rung's clients:
//!
//! ```toml
//! [[class]]
//! name = "typists"          # its target is [class.typists] in the bands file
//! kind = "typists"          # the keystroke model of `--workload typists`
//! weight = 8
//! model = "kjv"             # default: --model
//! max_tokens = 8            # default: --max-tokens
//! debounce_ms = 0           # typists only
//!
//! [[class]]
//! name = "long-streams"
//! kind = "requests"         # closed-loop clients, as the default workload
//! weight = 1
//! max_tokens = 256
//! stream = true             # requests only: event streams, time to first token measured
//! ```
//!
//! A rung of N clients gives each class its share of N by weight (largest
//! remainders; every class at least one client when N allows). All classes
//! run in the same window; each is judged against its own target, and a
//! class that misses it fails the rung.

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bands::Measures;

/// Why a profile was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("reading {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Parse { path: String, reason: String },
    #[error("{path}: class {class:?}: {reason}")]
    Class {
        path: String,
        class: String,
        reason: String,
    },
}

/// What a class's clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Typists,
    Requests,
}

impl Kind {
    pub fn measures(self) -> Measures {
        match self {
            Kind::Typists => Measures::Typists,
            Kind::Requests => Measures::Requests,
        }
    }
}

/// One class of a profile.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    pub name: String,
    pub kind: Kind,
    pub weight: f64,
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub stream: bool,
    pub debounce_ms: Option<u64>,
}

/// A mixed profile.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(rename = "class", default)]
    pub classes: Vec<Class>,
}

impl Profile {
    /// Reads and checks a profile.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: p.clone(),
            source,
        })?;
        Profile::parse(&text).map_err(|e| match e {
            ProfileError::Parse { reason, .. } => ProfileError::Parse { path: p, reason },
            ProfileError::Class { class, reason, .. } => ProfileError::Class {
                path: p,
                class,
                reason,
            },
            other => other,
        })
    }

    /// Parses and checks a profile's text.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let parse = |reason: String| ProfileError::Parse {
            path: String::new(),
            reason,
        };
        let p: Profile = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
        if p.classes.is_empty() {
            return Err(parse("a profile needs at least one [[class]]".into()));
        }
        let mut names = HashSet::new();
        for c in &p.classes {
            let bad = |reason: &str| ProfileError::Class {
                path: String::new(),
                class: c.name.clone(),
                reason: reason.to_owned(),
            };
            if c.name.is_empty()
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
            {
                return Err(bad("a name is letters, digits, '-' and '_'"));
            }
            if !names.insert(c.name.as_str()) {
                return Err(bad("two classes have this name"));
            }
            if !(c.weight.is_finite() && c.weight > 0.0) {
                return Err(bad("weight must be a positive number"));
            }
            if c.stream && c.kind != Kind::Requests {
                return Err(bad("only a class of requests streams"));
            }
            if c.debounce_ms.is_some() && c.kind != Kind::Typists {
                return Err(bad("only typists debounce"));
            }
            if c.max_tokens == Some(0) {
                return Err(bad("max_tokens must be at least 1"));
            }
        }
        Ok(p)
    }

    /// Each class's clients in a rung of `clients`: shares of the weights,
    /// largest remainders first, every class at least one if there are as
    /// many clients as classes.
    pub fn split(&self, clients: usize) -> Vec<usize> {
        let total: f64 = self.classes.iter().map(|c| c.weight).sum();
        let exact: Vec<f64> = self
            .classes
            .iter()
            .map(|c| clients as f64 * c.weight / total)
            .collect();
        let mut n: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
        let mut order: Vec<usize> = (0..n.len()).collect();
        order.sort_by(|&a, &b| {
            (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor()))
        });
        // Fewer left over than there are classes: the floors lose under one
        // client each.
        let left = clients.saturating_sub(n.iter().sum());
        for &i in order.iter().take(left) {
            n[i] += 1;
        }
        if clients >= n.len() {
            // Take one from the largest class for each class left empty.
            while let Some(empty) = n.iter().position(|&k| k == 0) {
                let Some(largest) = (0..n.len()).max_by_key(|&i| n[i]) else {
                    break;
                };
                if n[largest] <= 1 {
                    break;
                }
                n[largest] -= 1;
                n[empty] += 1;
            }
        }
        n
    }

    /// Each class's name and what it measures.
    pub fn kinds(&self) -> Vec<(String, Measures)> {
        self.classes
            .iter()
            .map(|c| (c.name.clone(), c.kind.measures()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIXED: &str = r#"
[[class]]
name = "typists"
kind = "typists"
weight = 8
[[class]]
name = "long-streams"
kind = "requests"
weight = 1
max_tokens = 256
stream = true
[[class]]
name = "other-model"
kind = "requests"
weight = 1
model = "fortunes"
"#;

    #[test]
    fn clients_are_shared_by_weight() {
        let p = Profile::parse(MIXED).expect("profile");
        assert_eq!(p.split(100), vec![80, 10, 10]);
        assert_eq!(p.split(50), vec![40, 5, 5]);
        assert_eq!(p.split(11), vec![9, 1, 1]);
        assert_eq!(p.split(3), vec![1, 1, 1], "every class gets one");
        for n in [0, 1, 2, 7, 13, 99, 1001] {
            assert_eq!(p.split(n).iter().sum::<usize>(), n, "{n}");
        }
    }

    #[test]
    fn the_shipped_profile_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/profiles/mixed.toml");
        let p = Profile::load(&path).expect("scripts/profiles/mixed.toml");
        assert_eq!(p.classes.len(), 3);
    }

    #[test]
    fn bad_classes_are_refused_by_name() {
        let e = |t: &str| Profile::parse(t).expect_err(t).to_string();
        assert!(e("").contains("at least one"));
        assert!(e("[[class]]\nname = \"a\"\nkind = \"typists\"\nweight = 0\n").contains("weight"));
        assert!(
            e("[[class]]\nname = \"a\"\nkind = \"typists\"\nweight = 1\nstream = true\n")
                .contains("stream")
        );
        assert!(
            e("[[class]]\nname = \"a\"\nkind = \"requests\"\nweight = 1\ndebounce_ms = 5\n")
                .contains("debounce")
        );
        assert!(e("[[class]]\nname = \"a b\"\nkind = \"requests\"\nweight = 1\n").contains("name"));
        assert!(e("[[class]]\nname = \"a\"\nkind = \"requests\"\nweight = 1\n[[class]]\nname = \"a\"\nkind = \"requests\"\nweight = 1\n")
            .contains("two classes"));
        assert!(e("[[class]]\nname = \"a\"\nkind = \"bots\"\nweight = 1\n").contains("bots"));
        assert!(
            e("[[class]]\nname = \"a\"\nkind = \"requests\"\nweight = 1\ncolour = 1\n")
                .contains("colour")
        );
    }
}
